"""Length-grouped batches: rows of similar length share a batch, so little is padded.

Fine-tuning data is short and spread out (GLUE sentences run from a few tokens to the
length cap), so a batch of random rows is mostly padding: about 60% with lengths
lognormal between 8 and 128 tokens and batch 16. Unpadding keeps padding out of the
matrix products, but attention, the gather into packed rows and the scatter back still
see it. transformers' ``group_by_length`` (its ``LengthGroupedSampler``) draws a random
order, cuts it into *megabatches* of 50 batches, sorts each megabatch by length and
batches it in that order: batches stay random in which rows they hold across the
epoch, but each holds rows of near-equal length (1-3% padding).

:class:`LengthGroupedOrder` does the same by position, as every ptm batch source must
(:class:`~ptm_core.data.batches.EpochBatches`): batch ``i`` of epoch ``e`` is a function
of ``(seed, e, i)`` alone, so resume, DDP ranks and DataLoader workers see the same
batches. A row's length is a cheap hint read from the row (characters of its text, see
:func:`row_length`), never a tokenization; rows of a kind it does not know keep the
random order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptm_core.data.shuffle import EpochOrder
from ptm_core.finetune.data.examples import ChoiceExample, SentenceExample, TaggedExample

#: Batches per megabatch (transformers' ``LengthGroupedSampler`` uses 50).
MEGABATCH = 50


def row_length(row: Any) -> int:
    """A row's length hint: characters of its text (word pieces where it has them).

    Sentences: both sentences; tagged sentences: the words and a space each; multiple
    choice: the context, the start and the longest ending; rows already tokenized (QA
    windows): their ``input_ids``. Anything else: 0 (it keeps the random order).
    """
    if isinstance(row, SentenceExample):
        return len(row.text) + len(row.pair or "")
    if isinstance(row, TaggedExample):
        return sum(len(word) + 1 for word in row.words)
    if isinstance(row, ChoiceExample):
        return len(row.context) + len(row.start) + max((len(e) for e in row.endings), default=0)
    ids = getattr(row, "input_ids", None)
    return len(ids) if isinstance(ids, Sequence) else 0


class LengthGroupedOrder:
    """Which rows batch ``i`` of an epoch holds when batches are grouped by length.

    Args:
        rows: the rows (indexed lazily; each length hint is read once and cached).
        batch_size: rows per batch.
        megabatch: batches per sorted group.
    """

    def __init__(self, rows: Sequence[Any], batch_size: int, megabatch: int = MEGABATCH) -> None:
        if megabatch < 1:
            raise ValueError(f"megabatch must be >= 1, got {megabatch}")
        self.rows = rows
        self.batch_size = batch_size
        self.megabatch = megabatch
        self._lengths = np.full(len(rows), -1, dtype=np.int64)
        self._sorted: tuple[tuple[int, int], np.ndarray] | None = None

    def _length(self, index: int) -> int:
        if self._lengths[index] < 0:
            self._lengths[index] = row_length(self.rows[index])
        return int(self._lengths[index])

    def indices(self, order: EpochOrder, epoch: int, index: int) -> list[int]:
        """Row indices of batch ``index`` of the epoch whose random order is ``order``."""
        span = self.batch_size * self.megabatch
        group = index // self.megabatch
        if self._sorted is None or self._sorted[0] != (epoch, group):
            start = group * span
            members = order.positions(np.arange(start, min(start + span, len(order))))
            lengths = np.array([self._length(int(i)) for i in members])
            # Longest first within the group; ties keep the random order.
            self._sorted = ((epoch, group), members[np.argsort(-lengths, kind="stable")])
        offset = (index - group * self.megabatch) * self.batch_size
        return self._sorted[1][offset : offset + self.batch_size].tolist()


__all__ = ["MEGABATCH", "LengthGroupedOrder", "row_length"]
