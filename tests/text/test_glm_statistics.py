"""Statistical tests of GLM's published rates: Poisson(3) span lengths, 15% coverage,
GLM-Doc's single span of a uniform 50-100% share, GLM-Sent's whole sentences until 15% is
covered, and the per-batch task shares (fixed seeds, so the tests are exact reruns; each
threshold is a test at the 0.1% level)."""

from __future__ import annotations

import itertools
import random

import numpy as np
from scipy import stats

from ptm_text.glm.construction import (
    DOCUMENT,
    MAX_SPAN_LENGTH,
    SENTENCE,
    SPAN,
    poisson_weights,
    row_sentences,
    sample_row_spans,
    sample_sentence_spans,
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


def _sentence_row(rng: random.Random, lengths: list[int]) -> list[int]:
    """``sentence_starts`` flags of ``[CLS] sentences [SEP]`` (first sentence maybe cut)."""
    flags = [0]
    for i, length in enumerate(lengths):
        flags += [int(i > 0 or rng.random() < 0.7)] + [0] * (length - 1)
    return [*flags, 0]


def test_sentences_are_whole_and_cover_15_percent_minimally() -> None:
    """Generated rows of 2-30 sentences of 1-40 tokens: every span is one whole sentence,
    the covered share reaches 15% (or every sentence is taken), and the last sentence
    taken is the one that crossed it (GLM stops there)."""
    rng = random.Random(5)
    coverages = []
    for _ in range(2000):
        lengths = [rng.randint(1, 40) for _ in range(rng.randint(2, 30))]
        flags = _sentence_row(rng, lengths)
        sentences = set(row_sentences(flags))
        spans = sample_sentence_spans(flags, rng)
        assert set(spans) <= sentences and len(set(spans)) == len(spans)
        covered = sum(end - start for start, end in spans)
        need = int(0.15 * len(flags))
        assert covered >= need or len(spans) == len(sentences)
        # Before the last sentence taken, fewer than `need` were covered; that sentence
        # is at most the longest one taken.
        assert covered - max(end - start for start, end in spans) < need or len(spans) == 1
        coverages.append(covered / len(flags))
    assert float(np.mean(coverages)) >= 0.15


def test_every_sentence_is_equally_likely_to_be_taken() -> None:
    """Rows of 10 sentences of 8 tokens (82 tokens, 12 to cover: two sentences): each
    position is taken with probability 1/5; a chi-square test over the positions."""
    rng = random.Random(6)
    flags = [0] + ([1] + [0] * 7) * 10 + [0]
    counts = np.zeros(10)
    rows = 3000
    for _ in range(rows):
        spans = sample_sentence_spans(flags, rng)
        assert len(spans) == 2
        for start, _ in spans:
            counts[(start - 1) // 8] += 1
    _, p_value = stats.chisquare(counts, np.full(10, 2 * rows / 10))
    assert p_value > 1e-3, counts


def test_taking_sentences_in_row_order_fails_the_same_test() -> None:
    """The chi-square above can fail: always the first two sentences is rejected."""
    counts = np.zeros(10)
    counts[:2] = 3000
    assert stats.chisquare(counts, np.full(10, 600.0)).pvalue < 1e-3


def test_batch_tasks_follow_the_configured_shares() -> None:
    """GLM's per-batch task draw: with document_prob=0.2 and sentence_prob=0.3, the three
    tasks' counts over 4000 batches pass a chi-square test against 0.2/0.3/0.5."""
    from ptm_core import bert_encoder
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.tokenization import VocabInfo
    from ptm_text.glm.objective import GLMObjective

    vocab = VocabInfo(vocab_size=30, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
    encoder = bert_encoder(vocab_size=30, hidden_size=8, num_layers=1, num_heads=2)
    objective = build_objective(GLMObjective, encoder, vocab, document_prob=0.2, sentence_prob=0.3)
    rng = random.Random(7)
    drawn = [objective.draw_task(rng) for _ in range(4000)]
    observed = [drawn.count(DOCUMENT), drawn.count(SENTENCE), drawn.count(SPAN)]
    assert stats.chisquare(observed, [800, 1200, 2000]).pvalue > 1e-3, observed
