"""A linear-chain conditional random field over per-word tag scores."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

# Score given to a transition the BIO constraint forbids. Finite (not -inf) so that a gold
# sequence that breaks the constraint (IOB1 data read as BIO) gives a large finite loss
# instead of inf/nan; exp(-1e4) is 0 in float32, so the distribution is unchanged.
FORBIDDEN = -1.0e4


def bio_transition_mask(tag_names: Sequence[str]) -> tuple[Tensor, Tensor]:
    """Which transitions BIO (IOB2) tagging allows: ``I-X`` only after ``B-X`` or ``I-X``.

    Args:
        tag_names: One name per tag id: ``"O"``, ``"B-<type>"`` or ``"I-<type>"``.

    Returns:
        ``(allowed, allowed_start)``: ``allowed (T, T)`` bool, ``allowed[i, j]`` = tag ``j``
        may follow tag ``i``; ``allowed_start (T,)`` bool, tag may open a sentence (no
        ``I-X`` first). Every tag may end a sentence.

    Raises:
        ValueError: For a name that is not ``O``, ``B-*`` or ``I-*``.
    """
    kinds: list[tuple[str, str]] = []
    for index, name in enumerate(tag_names):
        if name == "O":
            kinds.append(("O", ""))
        elif name[:2] in ("B-", "I-") and len(name) > 2:
            kinds.append((name[0], name[2:]))
        else:
            raise ValueError(
                f"tag {index} is {name!r}: the BIO constraint needs tags 'O', 'B-<type>' or "
                "'I-<type>' (convert BIOES/IOB1 tags to BIO, or build the CRF without "
                "constraint)"
            )
    count = len(kinds)
    allowed = torch.ones(count, count, dtype=torch.bool)
    allowed_start = torch.ones(count, dtype=torch.bool)
    for j, (kind_j, type_j) in enumerate(kinds):
        if kind_j != "I":
            continue
        allowed_start[j] = False
        for i, (kind_i, type_i) in enumerate(kinds):
            allowed[i, j] = kind_i in ("B", "I") and type_i == type_j
    return allowed, allowed_start


class LinearChainCRF(nn.Module):
    """Linear-chain CRF (Lafferty et al., 2001), the output layer of Lample et al. (2016).

    The score of a tag sequence ``y`` for emissions ``E`` (length ``n``) is

    .. math::
        s(y) = \\pi_{y_1} + \\sum_{t=1}^{n} E_{t, y_t}
               + \\sum_{t=2}^{n} A_{y_{t-1}, y_t} + \\omega_{y_n}

    with transitions ``A`` (``transitions[i, j]``: from ``i`` to ``j``), start scores
    ``pi`` and end scores ``omega``; ``p(y | E) = exp(s(y)) / Z``. :meth:`log_likelihood`
    computes ``log p`` with the forward algorithm in log space; :meth:`decode` finds the
    best sequence with Viterbi. Both are batched and take a mask of real positions (a
    prefix of each row). Computation is in float32 whatever the emissions' dtype.

    With ``tag_names`` and ``constraint="bio"``, transitions into ``I-X`` from anything but
    ``B-X``/``I-X`` (and ``I-X`` at the start) get a fixed score of ``-1e4``: such
    sequences have probability 0 and Viterbi never outputs them.

    Like every head, the CRF computes no loss itself; the negative log-likelihood is the
    usual training loss.

    Args:
        num_tags: ``T``.
        tag_names: One name per tag (needed for the constraint).
        constraint: ``"bio"`` or ``None``.

    Shapes:
        emissions ``(B, W, T)``, tags ``(B, W)`` long, mask ``(B, W)`` bool (True at real
        words, left-aligned; a row may be empty).
    """

    allowed: Tensor
    allowed_start: Tensor

    def __init__(
        self,
        num_tags: int,
        *,
        tag_names: Sequence[str] | None = None,
        constraint: str | None = None,
    ) -> None:
        super().__init__()
        if num_tags < 1:
            raise ValueError(f"num_tags must be >= 1, got {num_tags}")
        self.num_tags = num_tags
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        nn.init.uniform_(self.transitions, -0.1, 0.1)
        nn.init.uniform_(self.start_transitions, -0.1, 0.1)
        nn.init.uniform_(self.end_transitions, -0.1, 0.1)
        allowed = torch.ones(num_tags, num_tags, dtype=torch.bool)
        allowed_start = torch.ones(num_tags, dtype=torch.bool)
        if constraint is not None:
            if constraint != "bio":
                raise ValueError(f"unknown CRF constraint {constraint!r}; valid: 'bio' or None")
            if tag_names is None or len(tag_names) != num_tags:
                raise ValueError(
                    f"constraint='bio' needs tag_names with {num_tags} names, got "
                    f"{None if tag_names is None else len(tag_names)}"
                )
            allowed, allowed_start = bio_transition_mask(tag_names)
        self.register_buffer("allowed", allowed, persistent=False)
        self.register_buffer("allowed_start", allowed_start, persistent=False)

    def scores(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(transitions (T, T), start (T,), end (T,))`` in float32 with the constraint applied."""
        forbidden = torch.tensor(FORBIDDEN, device=self.transitions.device)
        transitions = torch.where(self.allowed, self.transitions.float(), forbidden)
        start = torch.where(self.allowed_start, self.start_transitions.float(), forbidden)
        return transitions, start, self.end_transitions.float()

    def _check(self, emissions: Tensor, mask: Tensor) -> Tensor:
        if emissions.dim() != 3 or emissions.shape[-1] != self.num_tags:
            raise ValueError(
                f"emissions must be (B, W, {self.num_tags}), got {tuple(emissions.shape)}"
            )
        if mask.shape != emissions.shape[:2]:
            raise ValueError(
                f"mask {tuple(mask.shape)} does not match emissions {tuple(emissions.shape[:2])}"
            )
        return mask.bool()

    def sequence_score(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """``s(y)`` of the given tag sequences, ``(B,)`` (0 for an empty row)."""
        mask = self._check(emissions, mask)
        transitions, start, end = self.scores()
        emissions = emissions.float()
        tags = tags.masked_fill(~mask, 0)
        maskf = mask.float()
        emitted = emissions.gather(2, tags.unsqueeze(-1)).squeeze(-1)  # (B, W)
        score = (emitted * maskf).sum(1)
        if tags.shape[1] > 1:
            moved = transitions[tags[:, :-1], tags[:, 1:]]  # (B, W-1)
            score = score + (moved * maskf[:, 1:]).sum(1)
        lengths = mask.sum(1)
        last = tags.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
        boundary = start[tags[:, 0]] + end[last]
        return score + torch.where(lengths > 0, boundary, torch.zeros_like(boundary))

    def log_partition(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """``log Z`` by the forward algorithm in log space, ``(B,)`` (0 for an empty row)."""
        mask = self._check(emissions, mask)
        transitions, start, end = self.scores()
        emissions = emissions.float()
        alpha = start + emissions[:, 0]  # (B, T)
        for t in range(1, emissions.shape[1]):
            # (B, T_prev, 1) + (T_prev, T) + (B, 1, T) -> logsumexp over T_prev
            step = torch.logsumexp(
                alpha.unsqueeze(2) + transitions + emissions[:, t].unsqueeze(1), dim=1
            )
            alpha = torch.where(mask[:, t : t + 1], step, alpha)
        log_z = torch.logsumexp(alpha + end, dim=1)
        return torch.where(mask.any(1), log_z, torch.zeros_like(log_z))

    def log_likelihood(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """``log p(tags | emissions)`` per sequence, ``(B,)``; tags at masked positions are ignored."""
        return self.sequence_score(emissions, tags, mask) - self.log_partition(emissions, mask)

    @torch.no_grad()
    def decode(self, emissions: Tensor, mask: Tensor, pad_value: int = -100) -> Tensor:
        """The most likely tag sequences (Viterbi), ``(B, W)`` long, ``pad_value`` where masked."""
        mask = self._check(emissions, mask)
        transitions, start, end = self.scores()
        emissions = emissions.float()
        batch, width, count = emissions.shape
        score = start + emissions[:, 0]  # (B, T)
        identity = torch.arange(count, device=emissions.device).expand(batch, count)
        pointers = []
        for t in range(1, width):
            best, index = (score.unsqueeze(2) + transitions).max(dim=1)  # (B, T) over T_prev
            real = mask[:, t : t + 1]
            score = torch.where(real, best + emissions[:, t], score)
            # At padding a tag points to itself, so the backtrack carries the last real tag.
            pointers.append(torch.where(real, index, identity))
        tags = torch.empty(batch, width, dtype=torch.long, device=emissions.device)
        tags[:, -1] = (score + end).argmax(dim=1)
        for t in range(width - 1, 0, -1):
            tags[:, t - 1] = pointers[t - 1].gather(1, tags[:, t : t + 1]).squeeze(1)
        return tags.masked_fill(~mask, pad_value)
