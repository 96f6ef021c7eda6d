"""GloVe in torch: co-occurrence counting, then weighted least squares with AdaGrad.

Pennington, Socher and Manning, 2014, "GloVe: Global Vectors for Word Representation".

1. Counting (:func:`count_cooccurrences`), as the reference ``cooccur.c``: words outside the
   vocabulary are dropped, then within each sentence every pair of words ``d <= window``
   apart adds ``1/d`` to ``X[w, c]`` and, symmetric, to ``X[c, w]``. Sentences stream
   through in chunks of ``chunk_tokens`` words; each chunk's pairs become a COO matrix
   whose duplicates are summed, merged into the running CSR total. Memory is bounded by
   the nonzeros of ``X`` plus one chunk, never by the corpus. The matrix is cached on disk
   under a key of the corpus fingerprint, the vocabulary and the settings, so reruns skip
   counting.
2. Training (:func:`train_glove`): ``J = sum_{X_ij > 0} f(X_ij) (w_i . w~_j + b_i + b~_j -
   log X_ij)^2`` with ``f(x) = min(1, (x / x_max)^alpha)``, by AdaGrad over shuffled
   nonzeros (learning rate 0.05, accumulators starting at 1, as ``glove.c``). The output
   vectors are ``W + W~`` (section 4.2 of the paper).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from tqdm.auto import tqdm

from ptm_classic.static.corpus import Sentences, Vocabulary, build_vocabulary, corpus_fingerprint
from ptm_classic.static.vectors import VectorTable
from ptm_core.atomic import atomic_file

logger = logging.getLogger(__name__)

COUNT_FORMAT = "ptm-glove-cooccurrence/1"


def glove_weight(x: torch.Tensor, x_max: float = 100.0, alpha: float = 0.75) -> torch.Tensor:
    """GloVe's weighting function ``f(x) = (x / x_max)^alpha`` for ``x < x_max``, else 1.

    Args:
        x: co-occurrence values (any shape, > 0).
        x_max: the cut-off (100 in the paper).
        alpha: the exponent (3/4 in the paper).

    Returns:
        ``f(x)``, same shape as ``x``.
    """
    return (x / x_max).pow(alpha).clamp(max=1.0)


def count_cooccurrences(
    sentences: Sentences,
    ids: dict[str, int],
    *,
    window: int = 10,
    symmetric: bool = True,
    distance_weighting: bool = True,
    chunk_tokens: int = 200_000,
    progress: bool = False,
) -> sp.csr_matrix:
    """Count weighted co-occurrences of one pass over ``sentences``.

    Args:
        sentences: a restartable stream of word lists.
        ids: word -> row of the matrix; other words are dropped before windows are taken.
        window: the largest distance between two counted words.
        symmetric: also count each pair as (context, word) (the paper's setting);
            ``False`` counts left contexts only.
        distance_weighting: add ``1/d`` for words ``d`` apart (the paper), else 1.
        chunk_tokens: words buffered before their pairs are merged into the total; a chunk
            holds about ``chunk_tokens * 2 * window`` pairs of 16 bytes while it is merged
            (200,000 words, window 10: about 64 MB).
        progress: show a progress bar (sentences counted).

    Returns:
        ``(V, V)`` float64 CSR matrix, ``V = len(ids)``; ``X[w, c]`` sums over occurrences
        of ``c`` within ``window`` words of ``w``.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    size = len(ids)
    total = sp.csr_matrix((size, size), dtype=np.float64)
    tokens = array("i")
    sentence_of = array("i")
    number = 0

    def flush() -> None:
        nonlocal total
        if not tokens:
            return
        words = np.array(tokens, dtype=np.int32)
        owner = np.array(sentence_of, dtype=np.int32)
        rows, cols, values = [], [], []
        for distance in range(1, min(window, len(words) - 1) + 1):
            same = owner[:-distance] == owner[distance:]
            left, right = words[:-distance][same], words[distance:][same]
            weight = 1.0 / distance if distance_weighting else 1.0
            rows.append(right)  # the word ...
            cols.append(left)  # ... and a context word to its left
            values.append(np.full(len(left), weight))
            if symmetric:
                rows.append(left)
                cols.append(right)
                values.append(np.full(len(left), weight))
        if rows:
            chunk = sp.coo_matrix(
                (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                shape=(size, size),
            ).tocsr()  # sums duplicate pairs
            total = total + chunk
        del tokens[:], sentence_of[:]

    bar = tqdm(desc="glove counting", unit=" sentences", disable=None if progress else True)
    for sentence in sentences:
        kept = [i for i in (ids.get(word) for word in sentence) if i is not None]
        if len(kept) > 1:
            tokens.extend(kept)
            sentence_of.extend([number] * len(kept))
            number += 1
            if len(tokens) >= chunk_tokens:
                flush()
        bar.update(1)
    flush()
    bar.close()
    total.sum_duplicates()
    total.eliminate_zeros()
    return total


def cooccurrence_cache_key(
    fingerprint: str, vocabulary: Vocabulary, settings: dict[str, Any]
) -> str:
    """A key of what a co-occurrence matrix depends on: corpus, vocabulary, settings."""
    digest = hashlib.sha256(f"{COUNT_FORMAT}\0{fingerprint}\0".encode())
    digest.update(json.dumps(settings, sort_keys=True).encode())
    for word in vocabulary.words:
        digest.update(word.encode("utf-8") + b"\n")
    return digest.hexdigest()[:32]


def cached_cooccurrences(
    sentences: Sentences,
    vocabulary: Vocabulary,
    *,
    window: int,
    symmetric: bool = True,
    distance_weighting: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> tuple[sp.csr_matrix, bool]:
    """:func:`count_cooccurrences`, read from ``cache_dir`` when counted before.

    The cache file is ``<cache_dir>/cooccurrence-<key>.npz`` (scipy's ``save_npz``, no
    pickles), keyed by the stream's ``fingerprint()``, the vocabulary and the settings. A
    stream without a fingerprint (a plain list) is always counted.

    Returns:
        ``(matrix, from_cache)``.
    """
    settings = {"window": window, "symmetric": symmetric, "distance_weighting": distance_weighting}
    fingerprint = corpus_fingerprint(sentences)
    path: Path | None = None
    if cache_dir is not None and fingerprint is not None:
        key = cooccurrence_cache_key(fingerprint, vocabulary, settings)
        path = Path(cache_dir) / f"cooccurrence-{key}.npz"
        if path.is_file():
            try:
                matrix = sp.load_npz(path).tocsr()
                if matrix.shape == (len(vocabulary), len(vocabulary)):
                    logger.info("GloVe co-occurrences read from the cache %s", path)
                    return matrix, True
            except (OSError, ValueError) as exc:
                logger.warning("ignoring the damaged cache %s (%s); counting again", path, exc)
    matrix = count_cooccurrences(
        sentences,
        vocabulary.ids,
        window=window,
        symmetric=symmetric,
        distance_weighting=distance_weighting,
        progress=progress,
    )
    if path is not None:
        with atomic_file(path) as tmp, open(tmp, "wb") as handle:
            sp.save_npz(handle, matrix, compressed=False)
    return matrix, False


class GloVeModel(nn.Module):
    """GloVe's parameters: word and context vectors and biases, and its loss.

    Args:
        vocab_size: ``V``.
        dim: vector size ``D``.

    Shapes:
        ``forward(rows, cols, log_x, weight)``: four ``(N,)`` tensors -> the scalar
        ``sum_n weight_n (w_r . w~_c + b_r + b~_c - log_x_n)^2 / 2``.
    """

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        # glove.c: every parameter uniform in [-0.5, 0.5) / D.
        self.word = nn.Parameter((torch.rand(vocab_size, dim) - 0.5) / dim)
        self.context = nn.Parameter((torch.rand(vocab_size, dim) - 0.5) / dim)
        self.word_bias = nn.Parameter((torch.rand(vocab_size) - 0.5) / dim)
        self.context_bias = nn.Parameter((torch.rand(vocab_size) - 0.5) / dim)

    def residual(self, rows: torch.Tensor, cols: torch.Tensor, log_x: torch.Tensor) -> torch.Tensor:
        """``(N,)``: ``w_r . w~_c + b_r + b~_c - log X_rc``."""
        dot = (self.word[rows] * self.context[cols]).sum(-1)
        return dot + self.word_bias[rows] + self.context_bias[cols] - log_x

    def forward(
        self, rows: torch.Tensor, cols: torch.Tensor, log_x: torch.Tensor, weight: torch.Tensor
    ) -> torch.Tensor:
        return 0.5 * (weight * self.residual(rows, cols, log_x).square()).sum()

    def output_vectors(self) -> torch.Tensor:
        """``(V, D)``: word + context vectors, the paper's output."""
        return (self.word + self.context).detach()


class _AdaGradRows:
    """AdaGrad on the rows a batch touches (``glove.c``'s update, one batch at a time):
    ``G[r] += g^2; p[r] -= lr * g / sqrt(G[r])`` with ``G`` starting at 1. Gradients of a
    row that occurs several times in the batch are summed first. O(batch * D) per step,
    where torch's ``Adagrad`` on a dense ``(V, D)`` gradient is O(V * D)."""

    def __init__(self, parameter: torch.Tensor, learning_rate: float) -> None:
        self.parameter = parameter
        self.squares = torch.ones_like(parameter)
        self.learning_rate = learning_rate

    def step(self, rows: torch.Tensor, grads: torch.Tensor) -> None:
        unique, inverse = torch.unique(rows, return_inverse=True)
        summed = torch.zeros((len(unique), *grads.shape[1:]), dtype=grads.dtype)
        summed.index_add_(0, inverse, grads)
        squares = self.squares[unique] + summed.square()
        self.squares[unique] = squares
        self.parameter[unique] -= self.learning_rate * summed / squares.sqrt()


@dataclass
class GloVeTraining:
    """The result of :func:`fit_glove`: the model and the mean loss per nonzero per epoch."""

    model: GloVeModel
    epoch_losses: list[float]


def fit_glove(
    matrix: sp.spmatrix,
    *,
    dim: int = 50,
    x_max: float = 100.0,
    alpha: float = 0.75,
    epochs: int = 25,
    learning_rate: float = 0.05,
    batch_size: int = 512,
    seed: int = 0,
    progress: bool = False,
) -> GloVeTraining:
    """Fit GloVe to a co-occurrence matrix with AdaGrad over its shuffled nonzeros.

    The gradients are the closed-form ones of ``glove.c`` (``d J / d w_r = f * e * w~_c``
    with residual ``e``, and so on), applied to the rows a batch touches.

    Args:
        matrix: ``(V, V)`` co-occurrence counts (any scipy sparse format).
        dim: vector size.
        x_max: the weighting cut-off.
        alpha: the weighting exponent.
        epochs: passes over the nonzeros.
        learning_rate: AdaGrad's rate (0.05 in the paper).
        batch_size: nonzeros per update.
        seed: seeds the initial vectors and the order of the nonzeros.
        progress: show a progress bar over epochs.

    Returns:
        :class:`GloVeTraining`; ``epoch_losses[e]`` is ``J / nnz`` during epoch ``e``.
    """
    coo = sp.coo_matrix(matrix)
    if coo.nnz == 0:
        raise ValueError(
            "the co-occurrence matrix is empty: the corpus has no two vocabulary words within "
            "the window of each other; give a larger corpus or lower min_count"
        )
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    model = GloVeModel(coo.shape[0], dim)
    rows_all = torch.from_numpy(coo.row.astype(np.int64))
    cols_all = torch.from_numpy(coo.col.astype(np.int64))
    values = torch.from_numpy(coo.data.astype(np.float32))
    log_x_all, weight_all = values.log(), glove_weight(values, x_max, alpha)
    threads = torch.get_num_threads()
    # Each step is a few small gathers and scatters: OpenMP threads cost more than they
    # give (on a busy 2-core machine 10 epochs took 113 s with 2 threads, 6 s with one).
    torch.set_num_threads(1)
    try:
        return _fit(
            model,
            coo.nnz,
            rows_all,
            cols_all,
            log_x_all,
            weight_all,
            generator,
            epochs=epochs,
            learning_rate=learning_rate,
            batch_size=batch_size,
            progress=progress,
        )
    finally:
        torch.set_num_threads(threads)


def _fit(
    model: GloVeModel,
    nnz: int,
    rows_all: torch.Tensor,
    cols_all: torch.Tensor,
    log_x_all: torch.Tensor,
    weight_all: torch.Tensor,
    generator: torch.Generator,
    *,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    progress: bool,
) -> GloVeTraining:
    with torch.no_grad():
        updates = [
            _AdaGradRows(p, learning_rate)
            for p in (model.word, model.context, model.word_bias, model.context_bias)
        ]
        losses: list[float] = []
        started = time.perf_counter()
        bar = tqdm(range(epochs), desc="glove", unit="epoch", disable=None if progress else True)
        for epoch in bar:
            order = torch.randperm(nnz, generator=generator)
            total = 0.0
            for start in range(0, nnz, batch_size):
                batch = order[start : start + batch_size]
                rows, cols = rows_all[batch], cols_all[batch]
                residual = model.residual(rows, cols, log_x_all[batch])  # (N,)
                weighted = weight_all[batch] * residual
                total += 0.5 * float((weighted * residual).sum())
                word, context = model.word[rows], model.context[cols]  # before the update
                updates[0].step(rows, weighted[:, None] * context)
                updates[1].step(cols, weighted[:, None] * word)
                updates[2].step(rows, weighted)
                updates[3].step(cols, weighted)
            losses.append(total / nnz)
            bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
            logger.info(
                "glove epoch %d/%d: loss %.4f (%.1f s)",
                epoch + 1,
                epochs,
                losses[-1],
                time.perf_counter() - started,
            )
    return GloVeTraining(model, losses)


def train_glove(
    sentences: Sentences,
    *,
    dim: int = 50,
    window: int = 10,
    min_count: int = 5,
    max_vocab_size: int | None = None,
    symmetric: bool = True,
    x_max: float = 100.0,
    alpha: float = 0.75,
    epochs: int = 25,
    learning_rate: float = 0.05,
    batch_size: int = 512,
    seed: int = 0,
    cache_dir: str | os.PathLike[str] | None = None,
    progress: bool = False,
) -> VectorTable:
    """Count co-occurrences of ``sentences`` (or read them from the cache) and fit GloVe.

    Args:
        sentences: a restartable stream of word lists.
        dim: vector size.
        window: co-occurrence window (each side).
        min_count: vocabulary: words seen at least this often.
        max_vocab_size: vocabulary: at most this many of the most frequent words.
        symmetric: count right contexts too.
        x_max: the weighting cut-off.
        alpha: the weighting exponent.
        epochs: AdaGrad passes over the nonzeros.
        learning_rate: AdaGrad's rate.
        batch_size: nonzeros per update.
        seed: initial vectors and order.
        cache_dir: where co-occurrence matrices are cached (``None``: not cached).
        progress: progress bars.

    Returns:
        :class:`VectorTable` (method ``glove``) of ``W + W~``; its metadata holds the
        settings, the loss per epoch and the matrix's size and nonzeros.
    """
    vocabulary = build_vocabulary(sentences, min_count=min_count, max_size=max_vocab_size)
    started = time.perf_counter()
    matrix, cached = cached_cooccurrences(
        sentences,
        vocabulary,
        window=window,
        symmetric=symmetric,
        cache_dir=cache_dir,
        progress=progress,
    )
    counting_s = time.perf_counter() - started
    fit = fit_glove(
        matrix,
        dim=dim,
        x_max=x_max,
        alpha=alpha,
        epochs=epochs,
        learning_rate=learning_rate,
        batch_size=batch_size,
        seed=seed,
        progress=progress,
    )
    settings = {
        "window": window,
        "min_count": min_count,
        "symmetric": symmetric,
        "x_max": x_max,
        "alpha": alpha,
        "epochs": epochs,
        "learning_rate": learning_rate,
        "seed": seed,
    }
    return VectorTable(
        vocabulary.words,
        fit.model.output_vectors(),
        "glove",
        {
            "settings": settings,
            "epoch_losses": fit.epoch_losses,
            "cooccurrence_nonzeros": int(matrix.nnz),
            "cooccurrence_from_cache": cached,
            "counting_seconds": counting_s,
            "corpus_words": vocabulary.total_words,
        },
    )


__all__ = [
    "GloVeModel",
    "GloVeTraining",
    "cached_cooccurrences",
    "count_cooccurrences",
    "fit_glove",
    "glove_weight",
    "train_glove",
]
