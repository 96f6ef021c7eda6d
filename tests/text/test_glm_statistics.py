"""Statistical tests of GLM's published rates: Poisson(3) span lengths, 15% coverage, and
GLM-Doc's single span of a uniform 50-100% share (fixed seeds, so the tests are exact
reruns; each threshold is a test at the 0.1% level)."""

from __future__ import annotations

import itertools
import random

import numpy as np
from scipy import stats

from ptm_text.glm.construction import (
    MAX_SPAN_LENGTH,
    poisson_weights,
    sample_row_spans,
    sample_span_lengths,
)


def _lengths(rows: int, row_length: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    drawn: list[int] = []
    for _ in range(rows):
        drawn += sample_span_lengths(row_length, rng)
    return drawn


def test_span_lengths_follow_truncated_poisson_3() -> None:
    drawn = np.array(_lengths(2000, 128, seed=0))
    weights = np.array(poisson_weights())
    probs = weights / weights.sum()  # Poisson(3) on 1..39, renormalised, as GLM draws
    assert drawn.min() >= 1 and drawn.max() <= MAX_SPAN_LENGTH - 1
    # Bins 1..8 and a tail bin >= 9 (expected counts all >= 5).
    observed = [int((drawn == k).sum()) for k in range(1, 9)] + [int((drawn >= 9).sum())]
    expected = [*(probs[:8] * len(drawn)), probs[8:].sum() * len(drawn)]
    _, p_value = stats.chisquare(observed, expected)
    assert p_value > 1e-3, (observed, expected)
    assert abs(drawn.mean() - (probs * np.arange(1, MAX_SPAN_LENGTH)).sum()) < 0.1


def test_span_lengths_are_not_plain_uniform() -> None:
    """The chi-square above can fail: uniform lengths on 1..8 are rejected by it."""
    rng = np.random.default_rng(0)
    drawn = rng.integers(1, 9, size=5000)
    weights = np.array(poisson_weights())
    probs = weights / weights.sum()
    observed = [int((drawn == k).sum()) for k in range(1, 9)] + [int((drawn >= 9).sum())]
    expected = [*(probs[:8] * len(drawn)), probs[8:].sum() * len(drawn)]
    assert stats.chisquare(observed, expected).pvalue < 1e-3


def test_coverage_reaches_15_percent_and_stays_close() -> None:
    rng = random.Random(1)
    coverages = []
    for _ in range(1000):
        row_length = rng.randint(64, 512)
        spans = sample_row_spans(row_length, rng)
        covered = sum(end - start for start, end in spans)
        assert covered >= int(0.15 * row_length)
        assert all(1 <= start < end <= row_length - 1 for start, end in spans)
        coverages.append(covered / row_length)
    # Drawing stops at the first length that crosses 15%: the overshoot is small.
    assert 0.15 <= float(np.mean(coverages)) < 0.17
    assert max(coverages) < 0.15 + MAX_SPAN_LENGTH / 64


def test_spans_never_touch_and_first_last_stay() -> None:
    rng = random.Random(2)
    for _ in range(500):
        row_length = rng.randint(8, 200)
        spans = sorted(sample_row_spans(row_length, rng))
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start > end
        assert all(start >= 1 and end <= row_length - 1 for start, end in spans)


def test_document_level_share_is_uniform_between_half_and_all() -> None:
    rng = random.Random(3)
    shares = []
    for _ in range(3000):
        row_length = 402  # 400 maskable tokens
        spans = sample_row_spans(row_length, rng, document=True)
        assert len(spans) == 1
        start, end = spans[0]
        shares.append((end - start) / 400)
    shares_arr = np.array(shares)
    assert shares_arr.min() >= 0.5 and shares_arr.max() <= 1.0
    assert stats.kstest(shares_arr, stats.uniform(loc=0.5, scale=0.5).cdf).pvalue > 1e-3
