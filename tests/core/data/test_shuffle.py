"""EpochOrder: a bijection of range(N) per (seed, epoch), uniform enough to train on."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

from ptm_core.data.batches import PretrainingBatches
from ptm_core.data.shuffle import EpochOrder


@pytest.mark.parametrize("size", [0, 1, 2, 3, 5, 64, 1000, 1024, 1025, 70_001])
def test_every_index_appears_once(size: int) -> None:
    order = EpochOrder(size, 0, 1)
    drawn = order[0:size]
    assert sorted(drawn.tolist()) == list(range(size))
    assert list(order) == drawn.tolist()
    if size:
        assert order[size - 1] == order[-1] == drawn[-1]


def test_drawn_from_seed_and_epoch_only() -> None:
    def first(*parts: int) -> list[int]:
        return EpochOrder(500, *parts)[0:500].tolist()

    assert first(0, 1) == first(0, 1)
    assert first(0, 1) != first(0, 2) and first(0, 1) != first(1, 1)
    assert EpochOrder(9, 0, 1, shuffle=False)[0:9].tolist() == list(range(9))
    with pytest.raises(IndexError, match=r"\[0, 10\)"):
        EpochOrder(10, 0, 1).positions(np.array([10]))


def test_a_huge_corpus_costs_nothing_to_order() -> None:
    order = EpochOrder(200_000_000_000, 0, 3)  # would be 1.6 TB as a randperm
    batch = order[123_456_789 : 123_456_789 + 32]
    assert len(set(batch.tolist())) == 32 and batch.max() < len(order)


def test_positions_are_uniform_and_neighbours_are_not_kept() -> None:
    # Over many epochs each index lands in each tenth of the epoch equally often, and two
    # consecutive positions hold consecutive indices with probability 1/N, as for a
    # uniform permutation. Four Feistel rounds failed the second check (1.17-1.29 x 1/N).
    for size, epochs in [(50, 3000), (1000, 400)]:
        counts = np.zeros((size, 10))
        adjacent = 0
        for epoch in range(epochs):
            drawn = EpochOrder(size, 7, epoch)[0:size]
            counts[drawn, (np.arange(size) * 10) // size] += 1
            adjacent += int((np.diff(drawn) == 1).sum())
        expected = counts.sum(axis=1, keepdims=True) / 10
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert scipy.stats.chi2.sf(chi2, size * 9) > 1e-3, (size, chi2)
        ratio = adjacent / (epochs * (size - 1) / size)
        assert 0.85 < ratio < 1.15, (size, ratio)


def test_batches_cover_each_epoch_once() -> None:
    examples = [{"input_ids": [i + 5]} for i in range(103)]
    batches = PretrainingBatches(examples, 10, pad_id=0, seed=4)
    for epoch in (0, 1):
        seen = [int(v) for b in batches.iter_batches(epoch) for v in b["input_ids"][:, 0].tolist()]
        assert sorted(seen) == [i + 5 for i in range(103)]
    first = batches.batch(0, 0)["input_ids"]
    assert not np.array_equal(first, batches.batch(1, 0)["input_ids"])
