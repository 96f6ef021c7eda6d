"""XLM's masked language modelling, for monolingual streams (MLM) and parallel pairs (TLM)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders import EncoderOutput
from ptm_core.objectives import (
    IGNORE_INDEX,
    Objective,
    ObjectiveOutput,
    apply_replacements,
    mask_tokens,
)
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.model import XLMPredictionHead

Batch = dict[str, Tensor]


def frequency_weights(counts: Sequence[int] | Tensor, alpha: float = 0.5) -> Tensor:
    """Selection weights ``w_t ∝ max(count_t, 1)^-alpha`` (XLM's smoothed masking).

    Rare subwords are chosen more often than in uniform masking, frequent ones (punctuation,
    articles) less (Lample & Conneau, 2019, section 3.3, alpha = 0.5).
    """
    counts_t = torch.as_tensor(counts, dtype=torch.float64).clamp(min=1.0)
    return counts_t.pow(-alpha)


def select_weighted_positions(
    candidates: Tensor, weights: Tensor, rate: float, generator: torch.Generator
) -> Tensor:
    """Choose ``rate`` of each row's candidates without replacement, in proportion to ``weights``.

    Row counts follow :func:`ptm_core.objectives.select_positions` (``floor(rate n + u)``,
    at least one); positions are drawn by the Gumbel-top-k trick, which samples ``k`` items
    without replacement with probabilities proportional to the weights.

    Args:
        candidates: ``(B, L)`` bool.
        weights: ``(B, L)`` positive weight per position.
        rate: fraction to choose.
        generator: seeded randomness.

    Returns:
        ``(B, L)`` bool subset of ``candidates``.
    """
    counts = candidates.sum(dim=1)
    jitter = torch.rand(counts.shape, generator=generator)
    k = torch.minimum(torch.floor(counts.float() * rate + jitter).long().clamp(min=1), counts)
    uniform = torch.rand(candidates.shape, generator=generator, dtype=torch.float64)
    gumbel = -torch.log(-torch.log(uniform.clamp(1e-12, 1 - 1e-12)))
    keys = weights.double().log() + gumbel
    keys = keys.masked_fill(~candidates, float("-inf"))
    ranks = keys.argsort(dim=1, descending=True).argsort(dim=1)
    return (ranks < k[:, None]) & candidates


class XLMMaskedLMObjective(Objective):
    """Masked LM of XLM (Lample & Conneau, 2019) for MLM streams and TLM pairs alike.

    Data side (every built batch): of the non-special tokens (padding, ``<s>``, ``</s>``
    never), select 15% and apply 80/10/10 with ptm_core's :func:`mask_tokens`. In a TLM
    batch both sentences are ordinary tokens, so both sides receive masks and the model
    may look at the translation to recover a masked word. With ``frequency_alpha`` set and
    token counts given (:meth:`set_token_counts`), positions are drawn with weights
    ``count^-alpha`` instead of uniformly. Loss side: :class:`XLMPredictionHead` tied to
    the token table, cross-entropy over the selected positions only.

    Args:
        vocab: special ids and vocabulary size.
        hidden_size, vocab_size: the encoder's width and token-table rows.
        tie_to: the token table the output layer is tied to.
        mask_prob, mask_token_prob, random_token_prob: the 15% / 80/10/10 rates.
        frequency_alpha: ``None`` = uniform selection; a number = smoothed selection.
        token_counts: ``(V,)`` corpus counts for smoothed selection (or set them later).

    Batch keys: reads ``input_ids``, ``special_tokens_mask``; writes ``input_ids``
    (corrupted) and ``mlm_labels`` ``(B, L)``. A ``tlm`` ``(B,)`` flag, when present, splits
    the accuracy metric into ``mlm_accuracy``/``tlm_accuracy`` batches.
    """

    name = "xlm_mlm"
    batch_keys = ("mlm_labels",)

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        frequency_alpha: float | None = None,
        token_counts: Sequence[int] | None = None,
    ) -> None:
        super().__init__()
        if vocab.vocab_size != vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{vocab_size}; build the encoder with the tokenizer's size"
            )
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        self.vocab = vocab
        self.mask_prob = mask_prob
        self.mask_token_prob = mask_token_prob
        self.random_token_prob = random_token_prob
        self.frequency_alpha = frequency_alpha
        self.selection_weights: Tensor | None = None
        if token_counts is not None:
            self.set_token_counts(token_counts)
        # XLM's single projection; a run started from XLM-R swaps in its transform head.
        self.head: nn.Module = XLMPredictionHead(hidden_size, vocab_size, tie_to=tie_to)

    def set_token_counts(self, counts: Sequence[int] | Tensor) -> None:
        """Give the corpus counts ``(V,)`` that smoothed selection weighs by."""
        if self.frequency_alpha is None:
            return
        if len(counts) != self.vocab.vocab_size:
            raise ValueError(
                f"token_counts has {len(counts)} entries, vocab has {self.vocab.vocab_size}"
            )
        self.selection_weights = frequency_weights(counts, self.frequency_alpha)

    def corrupt(
        self, input_ids: Tensor, special_tokens_mask: Tensor, generator: torch.Generator
    ) -> tuple[Tensor, Tensor]:
        """``(B, L)`` ids -> ``(corrupted ids, labels)`` (labels ``-100`` where unselected)."""
        rates = dict(mask_token_prob=self.mask_token_prob, random_token_prob=self.random_token_prob)
        if self.frequency_alpha is None:
            return mask_tokens(
                input_ids,
                special_tokens_mask,
                self.vocab,
                generator,
                mask_prob=self.mask_prob,
                **rates,
            )
        if self.selection_weights is None:
            raise ValueError(
                "frequency_alpha is set but no token counts were given; pass token_counts= "
                "or call set_token_counts(counts) before building batches"
            )
        candidates = ~special_tokens_mask.bool()
        selected = select_weighted_positions(
            candidates, self.selection_weights[input_ids], self.mask_prob, generator
        )
        corrupted = apply_replacements(input_ids, selected, self.vocab, generator, **rates)
        return corrupted, input_ids.masked_fill(~selected, IGNORE_INDEX)

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        ids, labels = self.corrupt(batch["input_ids"], batch["special_tokens_mask"], generator)
        return {**batch, "input_ids": ids, "mlm_labels": labels}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["mlm_labels"]
        selected = labels != IGNORE_INDEX
        logits = self.head(encoder_output.last_hidden_state[selected])  # (N, V)
        targets = labels[selected]
        loss = F.cross_entropy(logits.float(), targets)
        correct = (logits.argmax(-1) == targets).float()
        accuracy = correct.mean().detach() if targets.numel() else logits.new_zeros(())
        metrics = {"accuracy": accuracy, "predictions": selected.sum().detach().float()}
        if "tlm" in batch:
            kind = "tlm" if bool(batch["tlm"].any()) else "mlm"
            metrics[f"{kind}_accuracy"] = accuracy
        return ObjectiveOutput(loss=loss, metrics=metrics)
