"""ERNIE (Baidu) knowledge masking: basic, phrase- and entity-level units, staged schedule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor, nn

from ptm_core.data import PretrainingBatches
from ptm_core.objectives import IGNORE_INDEX, MaskedLMObjective
from ptm_core.objectives.base import Batch
from ptm_core.objectives.mlm import apply_replacements
from ptm_core.tokenization import VocabInfo

MaskingLevel = Literal["basic", "phrase", "entity"]
LEVELS: tuple[str, ...] = ("basic", "phrase", "entity")
# Per-token unit keys of a batch, by level (basic has none: every piece is its own unit).
UNIT_KEYS = {"phrase": "phrase_units", "entity": "entity_units"}
NO_UNIT = -1


def select_units(
    units: Tensor, candidates: Tensor, rate: float, generator: torch.Generator
) -> Tensor:
    """Choose whole units covering ``rate`` of a row's candidate tokens.

    A unit is the set of positions sharing a non-negative id in ``units``; every other
    candidate position is a unit of its own. Units are visited in random order and taken
    while the total stays within the row's budget ``floor(rate * n + u)``, ``u ~ U(0,1)``
    (so the expected masked fraction is ``rate``, as for :func:`select_positions`); a unit
    that does not fit is skipped, so units are never split.

    Args:
        units: ``(L,)`` unit id per position (``-1`` = none).
        candidates: ``(L,)`` bool, positions that may be masked (not special, not padding).
        rate: fraction of candidate tokens to mask.
        generator: seeded randomness.

    Returns:
        ``(L,)`` bool selection (a union of whole units).
    """
    positions = candidates.nonzero().squeeze(1).tolist()
    if not positions:
        return torch.zeros_like(candidates)
    groups: dict[int, list[int]] = {}
    singles: list[list[int]] = []
    for p in positions:
        unit = int(units[p])
        if unit == NO_UNIT:
            singles.append([p])
        else:
            groups.setdefault(unit, []).append(p)
    all_units = [*groups.values(), *singles]
    budget = int(len(positions) * rate + float(torch.rand((), generator=generator)))
    budget = max(1, min(budget, len(positions)))
    order = torch.randperm(len(all_units), generator=generator).tolist()
    chosen = torch.zeros_like(candidates)
    taken = 0
    for index in order:
        members = all_units[index]
        if taken + len(members) <= budget:
            chosen[members] = True
            taken += len(members)
            if taken == budget:
                break
    return chosen


@dataclass(frozen=True)
class MaskingSchedule:
    """ERNIE's staged training: basic, then phrase, then entity masking.

    Args:
        total_batches: batches over which the schedule runs (usually the trainer's
            ``max_steps`` times its accumulation steps).
        fractions: share of the batches per stage, in ``LEVELS`` order; the last stage
            continues after ``total_batches``.
    """

    total_batches: int
    fractions: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3)

    def level_at(self, batch_position: int) -> int:
        """Index into :data:`LEVELS` of the level used for the ``batch_position``-th batch."""
        edge = 0.0
        for level, fraction in enumerate(self.fractions):
            edge += fraction * self.total_batches
            if batch_position < edge:
                return level
        return len(self.fractions) - 1


class StagedMaskingBatches(PretrainingBatches):
    """:class:`PretrainingBatches` that tag each batch with its masking level.

    The level depends on the batch's position ``epoch * batches_per_epoch + index`` only,
    so batches stay deterministic and resumable. The tag is the ``(B,)`` long tensor
    ``batch["masking_level"]`` (index into :data:`LEVELS`), read by
    :class:`KnowledgeMaskingObjective`.

    Args:
        schedule: the :class:`MaskingSchedule`.
        (other arguments as :class:`PretrainingBatches`)
    """

    def __init__(
        self, examples: Sequence[dict], batch_size: int, *, schedule: MaskingSchedule, **kwargs: Any
    ) -> None:
        super().__init__(examples, batch_size, **kwargs)
        self.schedule = schedule

    def annotate(self, batch: Batch, epoch: int, index: int) -> Batch:
        level = self.schedule.level_at(epoch * self.batches_per_epoch + index)
        rows = batch["input_ids"].shape[0]
        batch["masking_level"] = torch.full((rows,), level, dtype=torch.long)
        return batch


class KnowledgeMaskingObjective(MaskedLMObjective):
    """Masked LM with ERNIE knowledge masking (Sun et al., 2019, "ERNIE: Enhanced
    Representation through Knowledge Integration").

    Three levels of masking units: ``basic`` (every word piece on its own, as BERT),
    ``phrase`` (all pieces of a phrase together) and ``entity`` (all pieces of a linked
    entity mention together); pieces outside phrases/mentions are single units at every
    level. ``mask_prob`` of the tokens of each row are covered by whole units
    (:func:`select_units`); the chosen tokens then get BERT's 80/10/10 replacement (decided
    per token) and the loss is the usual MLM cross-entropy. The level comes from
    ``batch["masking_level"]`` (set by :class:`StagedMaskingBatches`), else from ``level``.

    Args:
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        vocab: special ids and vocabulary size.
        level: the level when batches carry none.
        mask_prob: fraction of tokens masked.
        mask_token_prob, random_token_prob: BERT's replacement rates.

    Batch keys: reads ``input_ids``, ``special_tokens_mask``, ``phrase_units``,
    ``entity_units`` ``(B, L)`` (unit id per token, -1 none) and optional
    ``masking_level`` ``(B,)``; writes ``input_ids`` and ``mlm_labels``.
    """

    name = "mlm"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        level: MaskingLevel = "entity",
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
    ) -> None:
        super().__init__(
            vocab,
            hidden_size=hidden_size,
            vocab_size=vocab_size,
            tie_to=tie_to,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            mask_prob=mask_prob,
            mask_token_prob=mask_token_prob,
            random_token_prob=random_token_prob,
            mode="dynamic",
        )
        if level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
        self.level = level

    def select(self, batch: Batch, generator: torch.Generator) -> Tensor:
        """``(B, L)`` bool: the positions to mask, whole units at each row's level."""
        candidates = ~batch["special_tokens_mask"].bool()
        if "attention_mask" in batch:
            candidates &= batch["attention_mask"].bool()
        levels = batch.get("masking_level")
        selected = torch.zeros_like(candidates)
        for row in range(candidates.shape[0]):
            level = LEVELS[int(levels[row])] if levels is not None else self.level
            key = UNIT_KEYS.get(level)
            units = (
                batch[key][row]
                if key is not None
                else torch.full_like(batch["input_ids"][row], NO_UNIT)
            )
            selected[row] = select_units(units, candidates[row], self.mask_prob, generator)
        return selected

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        selected = self.select(batch, generator)
        ids = batch["input_ids"]
        corrupted = apply_replacements(
            ids,
            selected,
            self.vocab,
            generator,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )
        labels = ids.masked_fill(~selected, IGNORE_INDEX)
        return {**batch, "input_ids": corrupted, "mlm_labels": labels}


def level_names(levels: Sequence[int]) -> list[str]:
    """Level indices -> names."""
    return [LEVELS[i] for i in levels]
