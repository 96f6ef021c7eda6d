"""Word-level output layers for large vocabularies: full, sampled and adaptive softmax.

ELMo's biLM predicts words from a vocabulary of 793,471 types (1B Word Benchmark), where a
full softmax per token is the dominant cost. Two remedies:

- **sampled softmax** (Jean et al., 2015, "On using very large target vocabulary for
  neural machine translation"; TensorFlow's ``sampled_softmax_loss``, which ``bilm-tf``
  trains with): per batch, ``m`` candidate classes are drawn from a log-uniform (Zipfian)
  proposal ``Q`` over ids sorted by frequency, their logits are corrected by
  ``- log(m Q(k))`` (the expected count of ``k``), accidental hits of the target are
  removed, and the loss is taken over the target plus the candidates. Evaluation
  (``model.eval()``) uses the full softmax.
- **adaptive softmax** (Grave et al., 2017): torch's ``nn.AdaptiveLogSoftmaxWithLoss``,
  exact at training and evaluation time.

The word vocabulary must be sorted by decreasing frequency (after the special words), as
:func:`ptm_classic.recurrent.word_corpus.build_vocabulary` writes it, for both to pay off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SOFTMAX_KINDS = ("full", "sampled", "adaptive")


class LogUniformSampler:
    """Log-uniform (Zipfian) candidate sampler over ids ``0..V-1`` sorted by frequency.

    ``Q(k) = (log(k + 2) - log(k + 1)) / log(V + 1)``, as TensorFlow's
    ``log_uniform_candidate_sampler``; draws are with replacement.

    Args:
        num_classes: ``V``.
    """

    def __init__(self, num_classes: int) -> None:
        if num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {num_classes}")
        self.num_classes = num_classes
        self._log_range = math.log(num_classes + 1)

    def probability(self, ids: Tensor) -> Tensor:
        """``Q(ids)``, same shape as ``ids`` (float32)."""
        k = ids.to(torch.float32)
        return (torch.log(k + 2.0) - torch.log(k + 1.0)) / self._log_range

    def sample(
        self, num_samples: int, device: torch.device, generator: torch.Generator | None = None
    ) -> Tensor:
        """``num_samples`` ids drawn from ``Q`` by inverting its CDF ``log(k+1)/log(V+1)``."""
        u = torch.rand(num_samples, device=device, generator=generator)
        ids = torch.exp(u * self._log_range).floor().long() - 1
        return ids.clamp_(0, self.num_classes - 1)


class WordSoftmax(nn.Module):
    """The output layer the forward and backward LMs share: per-token NLL of target words.

    Args:
        input_dim: size of the LSTM outputs it reads (the projection size).
        vocab_size: output words ``V`` (specials included).
        kind: ``"full"``, ``"sampled"`` (training only; full at evaluation) or ``"adaptive"``.
        num_samples: candidates per batch for ``"sampled"`` (ELMo: 8192). With
            ``num_samples >= V`` the full softmax is used (every class is a candidate).
        cutoffs: cluster boundaries for ``"adaptive"``; boundaries ``>= V`` are dropped.
        div_value: size ratio between adaptive clusters.

    Shapes:
        ``hidden (N, input_dim)``, ``targets (N,)`` -> per-token NLL ``(N,)``.
    """

    def __init__(
        self,
        input_dim: int,
        vocab_size: int,
        *,
        kind: str = "full",
        num_samples: int = 8192,
        cutoffs: Sequence[int] = (),
        div_value: float = 4.0,
    ) -> None:
        super().__init__()
        if kind not in SOFTMAX_KINDS:
            raise ValueError(f"softmax kind {kind!r} is unknown; valid: {', '.join(SOFTMAX_KINDS)}")
        if vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {vocab_size}")
        self.kind = kind
        self.vocab_size = vocab_size
        self.num_samples = int(num_samples)
        self.adaptive: nn.AdaptiveLogSoftmaxWithLoss | None = None
        if kind == "adaptive":
            kept = sorted({int(c) for c in cutoffs if 0 < int(c) < vocab_size})
            if not kept:
                kept = [max(1, vocab_size // 4)] if vocab_size > 2 else [1]
            if input_dim // div_value ** len(kept) < 1:
                raise ValueError(
                    f"adaptive softmax: input_dim {input_dim} / div_value {div_value} ** "
                    f"{len(kept)} clusters leaves a tail cluster without dimensions; use fewer "
                    "cutoffs or a smaller div_value"
                )
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(
                input_dim, vocab_size, kept, div_value=div_value
            )
        else:
            self.weight = nn.Parameter(torch.empty(vocab_size, input_dim))
            self.bias = nn.Parameter(torch.zeros(vocab_size))
            nn.init.normal_(self.weight, std=1.0 / math.sqrt(input_dim))
            self.sampler = LogUniformSampler(vocab_size)

    @property
    def exact(self) -> bool:
        """Whether :meth:`forward` returns the exact NLL in the current mode."""
        return not (self.training and self.uses_sampling)

    @property
    def uses_sampling(self) -> bool:
        return self.kind == "sampled" and self.num_samples < self.vocab_size

    def forward(self, hidden: Tensor, targets: Tensor) -> Tensor:
        if self.adaptive is not None:
            return -self.adaptive(hidden, targets).output
        if self.exact:
            return self.full_nll(hidden, targets)
        return self.sampled_nll(hidden, targets)

    def full_nll(self, hidden: Tensor, targets: Tensor) -> Tensor:
        """Exact per-token NLL ``-log softmax(W h + b)[y]``, shape ``(N,)``."""
        logits = F.linear(hidden, self.weight, self.bias)
        return F.cross_entropy(logits.float(), targets, reduction="none")

    def sampled_nll(
        self,
        hidden: Tensor,
        targets: Tensor,
        candidates: Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Sampled-softmax NLL with the logQ correction, shape ``(N,)``.

        ``L = -s_y + log(exp(s_y) + sum_{k in S, k != y} exp(s_k - log(m Q(k))))``: the
        candidates' sum is an importance-sampling estimate of the partition function
        without the target, unbiased since ``E[count_k] = m Q(k)``, so
        ``E[exp(L)] = exp(L_full)`` and ``L -> L_full`` as ``m`` grows. (TensorFlow also
        subtracts ``log Q(y)`` from the target's logit; that changes the loss value by a
        term without gradient, and would make it diverge from the full loss as ``m``
        grows, so it is left out.)

        Args:
            hidden: ``(N, D)``.
            targets: ``(N,)`` word ids.
            candidates: ``(m,)`` ids to use instead of drawing ``num_samples`` of them.
            generator: RNG for the draw (default: torch's global one).
        """
        if candidates is None:
            candidates = self.sampler.sample(self.num_samples, hidden.device, generator)
        m = candidates.numel()
        log_expected = torch.log(m * self.sampler.probability(candidates))  # (m,)
        true_logit = (hidden * self.weight[targets]).sum(-1) + self.bias[targets]  # (N,)
        sampled = F.linear(hidden, self.weight[candidates], self.bias[candidates])  # (N, m)
        sampled = sampled.float() - log_expected
        hits = candidates.unsqueeze(0) == targets.unsqueeze(1)
        sampled = sampled.masked_fill(hits, float("-inf"))
        logits = torch.cat([true_logit.float().unsqueeze(1), sampled], dim=1)
        return torch.logsumexp(logits, dim=1) - true_logit.float()

    def log_probs(self, hidden: Tensor) -> Tensor:
        """Full log-distribution over the vocabulary, ``(N, V)`` (evaluation, small V)."""
        if self.adaptive is not None:
            return self.adaptive.log_prob(hidden)
        return F.log_softmax(F.linear(hidden, self.weight, self.bias).float(), dim=-1)


__all__ = ["SOFTMAX_KINDS", "LogUniformSampler", "WordSoftmax"]
