"""XNLG's DAE noise: golden tests against the reference's construction, statistical tests
of its rates.

The reference is ``CZWin32768/XNLG`` ``xnlg/src/trainer.py`` (``word_shuffle``,
``word_dropout``, ``word_blank``, ``add_noise``). Its construction is transcribed below in
plain numpy/torch on its own layout (``x`` is ``(slen, bs)``, column ``i`` is
``</s> w_1 .. w_n </s>`` then padding, ``l`` the lengths), with its ``np.random`` draws
replaced by arrays the test passes in; ptm's functions get the same draws, column by
column, and must give the same sentences.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from ptm_multilingual.xnlg.noise import (
    REFERENCE_BLANK,
    REFERENCE_DROP,
    REFERENCE_SHUFFLE,
    DenoisingNoise,
    blank_words,
    drop_words,
    shuffle_words,
)

EOS, PAD, MASK = 1, 2, 4


# -- the reference, transcribed (its random draws passed in) ---------------------------------
def ref_word_shuffle(x: torch.Tensor, lengths: torch.Tensor, noise: np.ndarray, k: float):
    # noise: the reference's np.random.uniform(0, k, size=(slen - 1, bs))
    noise = noise.copy()
    noise[0] = -1
    assert k > 1
    x2 = x.clone()
    for i in range(lengths.size(0)):
        n = int(lengths[i])
        scores = np.arange(n - 1) + noise[: n - 1, i]
        permutation = scores.argsort()
        x2[: lengths[i] - 1, i].copy_(x2[: lengths[i] - 1, i][torch.from_numpy(permutation)])
    return x2, lengths


def ref_word_dropout(x, lengths, rand: np.ndarray, p: float, refill: list[int]):
    # rand: np.random.rand(slen - 1, bs); refill[i]: np.random.randint(1, len(words))
    keep = rand >= p
    keep[0] = 1
    sentences, new_lengths = [], []
    for i in range(lengths.size(0)):
        assert x[lengths[i] - 1, i] == EOS
        words = x[: lengths[i] - 1, i].tolist()
        new_s = [w for j, w in enumerate(words) if keep[j, i]]
        if len(new_s) == 1:
            new_s.append(words[refill[i]])
        new_s.append(EOS)
        sentences.append(new_s)
        new_lengths.append(len(new_s))
    l2 = torch.LongTensor(new_lengths)
    x2 = torch.LongTensor(l2.max(), l2.size(0)).fill_(PAD)
    for i in range(l2.size(0)):
        x2[: l2[i], i].copy_(torch.LongTensor(sentences[i]))
    return x2, l2


def ref_word_blank(x, lengths, rand: np.ndarray, p: float):
    keep = rand >= p
    keep[0] = 1
    sentences = []
    for i in range(lengths.size(0)):
        words = x[: lengths[i] - 1, i].tolist()
        new_s = [w if keep[j, i] else MASK for j, w in enumerate(words)]
        new_s.append(EOS)
        sentences.append(new_s)
    x2 = torch.LongTensor(lengths.max(), lengths.size(0)).fill_(PAD)
    for i in range(lengths.size(0)):
        x2[: lengths[i], i].copy_(torch.LongTensor(sentences[i]))
    return x2, lengths


def batch(sentences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(s) for s in sentences])
    x = torch.full((int(lengths.max()), len(sentences)), PAD, dtype=torch.long)
    for i, s in enumerate(sentences):
        x[: len(s), i] = torch.tensor(s)
    return x, lengths


def columns(x: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    return [x[: lengths[i], i].tolist() for i in range(lengths.size(0))]


HAND = [
    [EOS, 10, 11, 12, 13, 14, 15, EOS],
    [EOS, 20, 21, EOS],
    [EOS, 30, EOS],
    [EOS, 40, 41, 42, 43, EOS],
]


# -- golden ------------------------------------------------------------------------------------
def test_shuffle_matches_the_reference_on_hand_written_scores() -> None:
    x, lengths = batch(HAND)
    slen = x.size(0)
    noise = np.zeros((slen - 1, len(HAND)))
    noise[:, 0] = [0.0, 2.5, 0.1, 0.2, 2.9, 0.0, 0.5]  # 10 behind 11 and 12; 13 behind 14, 15
    noise[:, 1] = [0.0, 1.5, 0.2, 0, 0, 0, 0]  # 20 behind 21
    noise[:, 3] = [0.0, 0.1, 0.2, 0.3, 0.4, 0, 0]  # no move
    expected, _ = ref_word_shuffle(x, lengths, noise, 3.0)
    ours = [shuffle_words(s, noise[: len(s) - 1, i]) for i, s in enumerate(HAND)]
    assert ours == columns(expected, lengths)
    assert ours[0] == [EOS, 11, 12, 10, 14, 15, 13, EOS]
    assert ours[1] == [EOS, 21, 20, EOS]


def test_drop_matches_the_reference_including_the_refill_of_an_emptied_sentence() -> None:
    x, lengths = batch(HAND)
    rand = np.full((x.size(0) - 1, len(HAND)), 0.9)
    rand[[2, 4], 0] = 0.05  # drop 11 and 13
    rand[1:3, 1] = 0.01  # every word of sentence 1 dropped -> one put back
    rand[1, 2] = 0.01  # sentence 2's only word dropped -> put back
    refill = [1, 2, 1, 1]
    expected, new_lengths = ref_word_dropout(x, lengths, rand, 0.1, refill)
    ours = [drop_words(s, rand[: len(s) - 1, i] >= 0.1, refill[i]) for i, s in enumerate(HAND)]
    assert ours == columns(expected, new_lengths)
    assert ours[0] == [EOS, 10, 12, 14, 15, EOS]
    assert ours[1] == [EOS, 21, EOS]
    assert ours[2] == [EOS, 30, EOS]


def test_blank_matches_the_reference() -> None:
    x, lengths = batch(HAND)
    rand = np.full((x.size(0) - 1, len(HAND)), 0.5)
    rand[0, :] = 0.0  # the start symbol is never blanked, whatever its draw
    rand[[1, 6], 0] = 0.02
    rand[4, 3] = 0.09
    expected, _ = ref_word_blank(x, lengths, rand, 0.1)
    ours = [blank_words(s, rand[: len(s) - 1, i] >= 0.1, MASK) for i, s in enumerate(HAND)]
    ours_start_kept = [
        blank_words(s, np.r_[True, rand[1 : len(s) - 1, i] >= 0.1], MASK)
        for i, s in enumerate(HAND)
    ]
    assert ours_start_kept == columns(expected, lengths)
    assert ours[0] == [EOS, MASK, 11, 12, 13, 14, MASK, EOS]
    assert ours[3] == [EOS, 40, 41, 42, MASK, EOS]


@pytest.mark.parametrize("seed", range(5))
def test_random_draws_agree_with_the_reference_pipeline(seed: int) -> None:
    """add_noise = shuffle, drop, blank: the same draws give the same sentences."""
    rng = np.random.default_rng(seed)
    sentences = [
        [EOS, *rng.integers(10, 99, size=int(n)).tolist(), EOS] for n in rng.integers(1, 12, 16)
    ]
    x, lengths = batch(sentences)
    slen, bs = x.size(0), len(sentences)
    noise = rng.uniform(0, 3, size=(slen - 1, bs))
    drop = rng.random((slen - 1, bs))
    refill = [int(rng.integers(1, len(s) - 1)) if len(s) > 3 else 1 for s in sentences]
    x1, l1 = ref_word_shuffle(x, lengths, noise, 3.0)
    x2, l2 = ref_word_dropout(x1, l1, drop, 0.3, refill)
    blank = rng.random((int(l2.max()) - 1, bs))
    x3, l3 = ref_word_blank(x2, l2, blank, 0.3)
    ours = []
    for i, s in enumerate(sentences):
        out = shuffle_words(s, noise[: len(s) - 1, i])
        out = drop_words(out, drop[: len(out) - 1, i] >= 0.3, refill[i])
        keep = blank[: len(out) - 1, i] >= 0.3
        keep[0] = True  # the reference's keep[0] = 1
        ours.append(blank_words(out, keep, MASK))
    assert ours == columns(x3, l3)


def test_the_end_symbol_and_lengths_are_checked() -> None:
    with pytest.raises(ValueError, match="at least one word"):
        shuffle_words([EOS, EOS], np.zeros(1))
    with pytest.raises(ValueError, match="shape"):
        drop_words([EOS, 5, 6, EOS], np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match="refill"):
        drop_words([EOS, 5, 6, EOS], np.array([True, False, False]))
    with pytest.raises(ValueError, match="word_shuffle"):
        DenoisingNoise(MASK, shuffle=0.5)
    with pytest.raises(ValueError, match="word_dropout"):
        DenoisingNoise(MASK, drop=1.0)


# -- statistics of the published rates ---------------------------------------------------------
N_SENT, N_WORDS = 2000, 20
SENTENCE = [EOS, *range(100, 100 + N_WORDS), EOS]


def _z(successes: int, trials: int, p: float) -> float:
    return (successes - trials * p) / math.sqrt(trials * p * (1 - p))


def test_the_reference_rates_are_the_defaults() -> None:
    noise = DenoisingNoise(MASK)
    assert (noise.shuffle, noise.drop, noise.blank) == (3.0, 0.1, 0.1)
    assert (REFERENCE_SHUFFLE, REFERENCE_DROP, REFERENCE_BLANK) == (3.0, 0.1, 0.1)


def test_word_drop_rate_is_ten_percent() -> None:
    noise = DenoisingNoise(MASK, shuffle=0, drop=REFERENCE_DROP, blank=0)
    gen = torch.Generator().manual_seed(0)
    dropped = 0
    for _ in range(N_SENT):
        out = noise(SENTENCE, gen)
        assert out[0] == EOS and out[-1] == EOS
        dropped += len(SENTENCE) - len(out)
    assert abs(_z(dropped, N_SENT * N_WORDS, 0.1)) < 4


def test_word_blank_rate_is_ten_percent_and_spares_the_specials() -> None:
    noise = DenoisingNoise(MASK, shuffle=0, drop=0, blank=REFERENCE_BLANK)
    gen = torch.Generator().manual_seed(1)
    blanked = 0
    for _ in range(N_SENT):
        out = noise(SENTENCE, gen)
        assert len(out) == len(SENTENCE) and out[0] == EOS and out[-1] == EOS
        blanked += sum(t == MASK for t in out)
    assert abs(_z(blanked, N_SENT * N_WORDS, 0.1)) < 4


def test_shuffle_moves_no_word_k_places_and_swaps_neighbours_at_the_derived_rate() -> None:
    """With scores i + U(0, k), words i < j swap iff u_i - u_j > j - i: neighbours with
    probability (k - 1)^2 / (2 k^2) = 2/9 for k = 3; words k or more apart never."""
    k = REFERENCE_SHUFFLE
    noise = DenoisingNoise(MASK, shuffle=k, drop=0, blank=0)
    gen = torch.Generator().manual_seed(2)
    swaps = pairs = 0
    for _ in range(N_SENT):
        out = noise(SENTENCE, gen)
        assert sorted(out) == sorted(SENTENCE) and out[0] == EOS and out[-1] == EOS
        where = {token: place for place, token in enumerate(out)}
        for place, token in enumerate(SENTENCE[1:-1], start=1):
            assert abs(where[token] - place) < k
        for a, b in itertools.pairwise(SENTENCE[1:-1]):
            pairs += 1
            swaps += where[a] > where[b]
    p = (k - 1) ** 2 / (2 * k**2)
    assert abs(_z(swaps, pairs, p)) < 4


def test_a_one_word_sentence_keeps_its_word() -> None:
    noise = DenoisingNoise(MASK, shuffle=3, drop=0.9, blank=0)
    gen = torch.Generator().manual_seed(3)
    for _ in range(200):
        assert noise([EOS, 7, EOS], gen) == [EOS, 7, EOS]
