"""StagedBatches: a multi-stage schedule as one resumable batch stream."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pytest
import torch

from ptm_core.data.stages import Stage, StagedBatches
from ptm_core.training.batch_cursor import BatchCursor


class Numbered:
    """Batch ``i`` of epoch ``e`` of source ``tag`` is ``{"id": [tag, e, i]}``."""

    def __init__(self, tag: int, per_epoch: int, *, indexed: bool = True) -> None:
        self.tag = tag
        self.per_epoch = per_epoch
        self.asked: list[tuple[int, list[int]]] = []
        if not indexed:
            self.iter_indices = None  # type: ignore[assignment]

    @property
    def batches_per_epoch(self) -> int:
        return self.per_epoch

    def batch(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        return {"id": torch.tensor([self.tag, epoch, index])}

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        return (self.batch(epoch, i) for i in range(start, self.per_epoch))

    def iter_indices(  # type: ignore[no-redef]
        self, epoch: int, indices: Iterable[int]
    ) -> Iterator[dict[str, torch.Tensor]]:
        indices = list(indices)
        self.asked.append((epoch, indices))
        return (self.batch(epoch, i) for i in indices)


def ids(batches: Iterable[dict[str, torch.Tensor]]) -> list[tuple[int, ...]]:
    return [tuple(b["id"].tolist()) for b in batches]


def test_stages_run_in_order_for_their_lengths_and_roll_over_inside_a_stage() -> None:
    weak, clean = Numbered(0, 2), Numbered(1, 3)
    staged = StagedBatches([Stage("weak", weak, 5), Stage("clean", clean, 4)])
    assert staged.batches_per_epoch == 9
    got = ids(staged.iter_batches(0))
    # weak: 5 batches over its 2-batch epochs; clean: 4 over its 3-batch epochs
    assert got == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 2, 0),
        (1, 0, 0), (1, 0, 1), (1, 0, 2), (1, 1, 0),
    ]  # fmt: skip
    # consecutive batches of one stage epoch are asked for in one call
    assert clean.asked == [(0, [0, 1, 2]), (1, [0])]
    assert [staged.stage_name(0, i) for i in (0, 4, 5, 8)] == ["weak", "weak", "clean", "clean"]


def test_past_the_schedule_the_last_stage_goes_on() -> None:
    staged = StagedBatches([Stage("weak", Numbered(0, 2), 2), Stage("clean", Numbered(1, 3), 2)])
    # epoch 1 of the schedule = global batches 4..7 = clean's batches 2..5
    assert ids(staged.iter_batches(1)) == [(1, 0, 2), (1, 1, 0), (1, 1, 1), (1, 1, 2)]


def test_a_cursor_resumes_inside_a_stage_exactly() -> None:
    def staged() -> StagedBatches:
        return StagedBatches([Stage("a", Numbered(0, 3), 4), Stage("b", Numbered(1, 2), 3)])

    whole = BatchCursor(staged())
    expected = ids(next(whole) for _ in range(12))
    first = BatchCursor(staged())
    head = ids(next(first) for _ in range(5))
    resumed = BatchCursor(staged(), *first.position)
    assert head + ids(next(resumed) for _ in range(7)) == expected


def test_any_index_subset_matches_the_full_walk() -> None:
    staged = StagedBatches([Stage("a", Numbered(0, 3), 4), Stage("b", Numbered(1, 2), 3)])
    full = ids(staged.iter_batches(0))
    assert ids(staged.iter_indices(0, [1, 3, 4, 6])) == [full[i] for i in (1, 3, 4, 6)]
    # a source without iter_indices is walked from its start index
    plain = StagedBatches([Stage("a", Numbered(0, 3, indexed=False), 2)])
    assert ids(plain.iter_batches(0, 1)) == [(0, 0, 1)]


def test_a_stage_begins_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    staged = StagedBatches([Stage("weak", Numbered(0, 2), 2), Stage("clean", Numbered(1, 2), 2)])
    with caplog.at_level("INFO", logger="ptm_core.data.stages"):
        list(staged.iter_batches(0, 1))
    assert "stage 2/2 'clean' begins at step 2" in caplog.text
    assert "'weak' begins" not in caplog.text  # resumed after its first batch


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one stage"):
        StagedBatches([])
    with pytest.raises(ValueError, match="stage 'x' lasts 0 batches"):
        StagedBatches([Stage("x", Numbered(0, 2), 0)])
