"""Language sampling: q_l ∝ (n_l / N)^alpha, measured empirically."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from ptm_multilingual import LanguageSampler, XLMBatches, smoothed_probabilities
from ptm_multilingual.tokenizer import smoothed_sample

COUNTS = {"en": 9000, "fr": 800, "de": 200}


def _expected(alpha: float) -> dict[str, float]:
    total = sum(COUNTS.values())
    raw = {k: (n / total) ** alpha for k, n in COUNTS.items()}
    return {k: v / sum(raw.values()) for k, v in raw.items()}


def test_probabilities_formula() -> None:
    assert smoothed_probabilities(COUNTS, 1.0) == pytest.approx({"en": 0.9, "fr": 0.08, "de": 0.02})
    assert smoothed_probabilities(COUNTS, 0.5) == pytest.approx(_expected(0.5))
    assert smoothed_probabilities(COUNTS, 0.0) == pytest.approx({k: 1 / 3 for k in COUNTS})
    with pytest.raises(ValueError, match="alpha"):
        smoothed_probabilities(COUNTS, 1.5)


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_empirical_frequencies_match(alpha: float) -> None:
    sampler = LanguageSampler(COUNTS, alpha)
    draws = Counter(sampler.sample(200_000, torch.Generator().manual_seed(1)))
    for lang, q in _expected(alpha).items():
        freq = draws[lang] / 200_000
        print(f"alpha={alpha} {lang}: q={q:.4f} empirical={freq:.4f}")
        assert abs(freq - q) < 0.01


@pytest.mark.parametrize("alpha", [0.5, 1.0])
def test_batch_rows_follow_q(alpha: float) -> None:
    row = {"input_ids": [0, 5, 1], "special_tokens_mask": [1, 0, 1], "tlm": 0}
    mlm = {lang: [row] for lang in COUNTS}
    batches = XLMBatches(
        mlm,
        {},
        100,
        pad_id=2,
        alpha=alpha,
        mlm_counts=COUNTS,
        mlm_steps=1,
        tlm_steps=0,
        batches_per_epoch=1000,
    )
    draws = Counter(k for i in range(1000) for k in batches.sample_keys(0, i)[1])
    for lang, q in _expected(alpha).items():
        assert abs(draws[lang] / 100_000 - q) < 0.01


def test_vocabulary_sample_is_smoothed() -> None:
    texts = {lang: [f"{lang} sentence {i}" for i in range(n)] for lang, n in COUNTS.items()}
    sample = smoothed_sample(texts, 0.5, 50_000, seed=0)
    share = Counter(s.split()[0] for s in sample)
    for lang, q in _expected(0.5).items():
        assert abs(share[lang] / 50_000 - q) < 0.01
