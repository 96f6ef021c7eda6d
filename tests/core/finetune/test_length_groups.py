"""Length-grouped fine-tuning batches (transformers' ``group_by_length``, issue #36)."""

from __future__ import annotations

import random

import pytest

from ptm_core.finetune.data.examples import ChoiceExample, SentenceExample, TaggedExample
from ptm_core.finetune.data.length_groups import LengthGroupedOrder, row_length
from ptm_core.finetune.data.task_batches import TaskBatches


class _IdsFeaturizer:
    """A batch of the rows' numbers (no tokenizer needed to check the order)."""

    def featurize(self, rows: list[SentenceExample]) -> dict:
        import torch

        return {"ids": torch.tensor([int(row.id) for row in rows])}


def _rows(count: int, seed: int = 0) -> list[SentenceExample]:
    rng = random.Random(seed)
    return [
        SentenceExample(" ".join(["w"] * rng.randint(1, 120)), None, 0, str(i), i + 1)
        for i in range(count)
    ]


def _padding(rows: list[SentenceExample], batches: list[list[int]]) -> float:
    padded = real = 0
    for batch in batches:
        lengths = [len(rows[i].text) for i in batch]
        padded += max(lengths) * len(lengths)
        real += sum(lengths)
    return 1 - real / padded


def test_every_row_once_per_epoch_with_little_padding() -> None:
    rows = _rows(1000)
    grouped = TaskBatches(rows, _IdsFeaturizer(), 16, seed=3, group_by_length=True)
    plain = TaskBatches(rows, _IdsFeaturizer(), 16, seed=3)
    for epoch in (0, 1):
        batches = [grouped.indices(epoch, i) for i in range(len(grouped))]
        assert sorted(i for batch in batches for i in batch) == list(range(1000))
        random_batches = [plain.indices(epoch, i) for i in range(len(plain))]
        assert _padding(rows, batches) < 0.05 < 0.3 < _padding(rows, random_batches)
    # Epochs differ, and the groups are not the corpus order sorted once.
    assert grouped.indices(0, 0) != grouped.indices(1, 0)


def test_a_batch_depends_on_its_position_only() -> None:
    rows = _rows(500)
    first = TaskBatches(rows, _IdsFeaturizer(), 8, seed=1, group_by_length=True)
    again = TaskBatches(rows, _IdsFeaturizer(), 8, seed=1, group_by_length=True)
    full = [b["ids"].tolist() for b in first.iter_batches(0)]
    # Resuming mid-epoch (a fresh source, started at batch 37) gives the same tail.
    assert [b["ids"].tolist() for b in again.iter_batches(0, 37)] == full[37:]
    # Asked in any order (DDP ranks, workers): the same batches.
    assert [again.indices(0, i) for i in (60, 3, 59, 3)] == [
        first.indices(0, i) for i in (60, 3, 59, 3)
    ]


def test_evaluation_order_is_never_grouped() -> None:
    rows = _rows(40)
    ordered = TaskBatches(rows, _IdsFeaturizer(), 8, shuffle=False, group_by_length=True)
    assert [i for b in range(len(ordered)) for i in ordered.indices(0, b)] == list(range(40))


def test_length_hints_of_every_row_kind() -> None:
    assert row_length(SentenceExample("abc", "de", 0, "0", 1)) == 5
    assert row_length(TaggedExample(["ab", "c"], None, 1)) == 5
    assert row_length(ChoiceExample("ab", "c", ["d", "efg"], 0, "0", 1)) == 6

    class Window:
        def __init__(self) -> None:
            self.input_ids = [1, 2, 3, 4]

    assert row_length(Window()) == 4
    assert row_length(object()) == 0


def test_bad_megabatch_is_refused() -> None:
    with pytest.raises(ValueError, match="megabatch"):
        LengthGroupedOrder(_rows(4), 2, megabatch=0)
