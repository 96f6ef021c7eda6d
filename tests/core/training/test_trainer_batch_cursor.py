"""BatchCursor: the data position survives epoch ends and short or empty sources."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import pytest
import torch

from ptm_core.training.batch_cursor import BatchCursor, count_tokens


class Numbered:
    """Epoch e yields batches {"input_ids": [[e, i]]} for i in range(start, yielded)."""

    def __init__(self, batches_per_epoch: int, yielded: int | None = None) -> None:
        self.batches_per_epoch = batches_per_epoch
        self.yielded = batches_per_epoch if yielded is None else yielded

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        for index in range(start, self.yielded):
            yield {"input_ids": torch.tensor([[epoch, index]])}


def _ids(cursor: BatchCursor, n: int) -> list[tuple[int, int]]:
    return [tuple(b["input_ids"][0].tolist()) for b in islice(cursor, n)]


def test_position_names_the_next_batch_across_epochs() -> None:
    cursor = BatchCursor(Numbered(3), epoch=1, index=2)
    assert _ids(cursor, 1) == [(1, 2)]
    assert cursor.position == (2, 0) and cursor.epoch_progress == 2.0
    assert _ids(cursor, 2) == [(2, 0), (2, 1)]
    assert cursor.position == (2, 2)
    restarted = BatchCursor(Numbered(3), *cursor.position)
    assert _ids(restarted, 3) == _ids(cursor, 3) == [(2, 2), (3, 0), (3, 1)]


def test_short_source_rolls_over_when_exhausted() -> None:
    cursor = BatchCursor(Numbered(4, yielded=2))
    assert _ids(cursor, 3) == [(0, 0), (0, 1), (1, 0)]


def test_empty_sources_are_rejected() -> None:
    with pytest.raises(ValueError, match="batches_per_epoch is 0"):
        BatchCursor(Numbered(0))
    with pytest.raises(RuntimeError, match="yielded no batches"):
        next(BatchCursor(Numbered(2, yielded=0)))


def test_count_tokens_prefers_the_mask() -> None:
    ids = torch.ones(2, 5, dtype=torch.long)
    assert (
        count_tokens({"input_ids": ids, "attention_mask": torch.tensor([[1] * 5, [1, 1, 0, 0, 0]])})
        == 7
    )
    assert count_tokens({"input_ids": ids}) == 10


def test_count_tokens_reads_a_visibility_matrix_by_its_diagonal() -> None:
    from ptm_core.modules.attention_masks import left_to_right_mask

    padding = torch.tensor([[1] * 5, [1, 1, 0, 0, 0]])
    visibility = left_to_right_mask(padding)  # (2, 5, 5): 15 + 3 visible pairs
    assert int(visibility.sum()) == 18
    assert count_tokens({"input_ids": torch.ones(2, 5), "attention_mask": visibility}) == 7
