"""GloVe: co-occurrence counts against a brute-force count, the weighting, the loss, the cache."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from static_planted import planted_corpus, topic_of

from ptm_classic.static.corpus import SentenceCorpus, build_vocabulary
from ptm_classic.static.glove import (
    cached_cooccurrences,
    count_cooccurrences,
    fit_glove,
    glove_weight,
    train_glove,
)


def brute_force(
    sentences: Sequence[Sequence[str]], ids: dict[str, int], window: int, symmetric: bool
) -> dict[tuple[int, int], float]:
    """Two loops per word, as glove's cooccur.c: out-of-vocabulary words dropped first."""
    counts: dict[tuple[int, int], float] = {}
    for sentence in sentences:
        kept = [ids[w] for w in sentence if w in ids]
        for j, word in enumerate(kept):
            for k in range(max(0, j - window), j):
                pairs = [(word, kept[k])] + ([(kept[k], word)] if symmetric else [])
                for pair in pairs:
                    counts[pair] = counts.get(pair, 0.0) + 1.0 / (j - k)
    return counts


@pytest.mark.parametrize(("window", "symmetric"), [(1, True), (3, True), (4, False)])
def test_counts_equal_a_brute_force_count(window: int, symmetric: bool) -> None:
    rng = random.Random(window)
    words = [f"w{i}" for i in range(9)]
    corpus = [rng.choices(words, k=rng.randint(0, 12)) for _ in range(40)]
    ids = {w: i for i, w in enumerate(words[:7])}  # w7, w8 are out of the vocabulary
    # A tiny chunk makes the stream merge many partial matrices.
    matrix = count_cooccurrences(corpus, ids, window=window, symmetric=symmetric, chunk_tokens=7)
    expected = brute_force(corpus, ids, window, symmetric)
    coo = matrix.tocoo()
    got = {(int(r), int(c)): float(v) for r, c, v in zip(coo.row, coo.col, coo.data, strict=True)}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12)
    if symmetric:
        assert abs(matrix - matrix.T).max() < 1e-12


def test_weighting_below_and_at_or_above_x_max() -> None:
    x = torch.tensor([1.0, 50.0, 99.0, 100.0, 250.0])
    f = glove_weight(x, x_max=100.0, alpha=0.75)
    assert f[:3].tolist() == pytest.approx([0.01**0.75, 0.5**0.75, 0.99**0.75])
    assert f[3:].tolist() == [1.0, 1.0]
    assert glove_weight(torch.tensor([2.0]), x_max=4.0, alpha=1.0).item() == pytest.approx(0.5)


def test_loss_falls_and_planted_neighbours_come_first() -> None:
    corpus = planted_corpus(sentences=200)
    table = train_glove(corpus, dim=16, window=3, min_count=1, epochs=40, x_max=10.0, seed=0)
    losses = table.metadata["epoch_losses"]
    assert losses[-1] < 0.5 * losses[0]
    assert all(b <= a * 1.05 for a, b in itertools.pairwise(losses))
    assert table.method == "glove" and table.dim == 16
    hits = sum(
        topic_of(table.most_similar(word, 1)[0][0]) == topic_of(word) for word in table.vocab
    )
    assert hits >= 18  # of 20 words


def test_fit_rejects_an_empty_matrix() -> None:
    import scipy.sparse as sp

    with pytest.raises(ValueError, match="co-occurrence matrix is empty"):
        fit_glove(sp.csr_matrix((3, 3)))


def test_counts_are_cached_by_corpus_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "corpus.txt"
    path.write_text("the cat sat on the mat.\nthe dog sat on the log.\n", encoding="utf-8")
    corpus = SentenceCorpus(path)
    vocabulary = build_vocabulary(corpus)
    first, cached = cached_cooccurrences(corpus, vocabulary, window=2, cache_dir=tmp_path / "c")
    assert not cached
    again, cached = cached_cooccurrences(corpus, vocabulary, window=2, cache_dir=tmp_path / "c")
    assert cached and (first != again).nnz == 0
    _, cached = cached_cooccurrences(corpus, vocabulary, window=3, cache_dir=tmp_path / "c")
    assert not cached  # another window is another key
    path.write_text("the cat sat on the mat.\n", encoding="utf-8")
    _, cached = cached_cooccurrences(
        SentenceCorpus(path), vocabulary, window=2, cache_dir=tmp_path / "c"
    )
    assert not cached  # the corpus changed
