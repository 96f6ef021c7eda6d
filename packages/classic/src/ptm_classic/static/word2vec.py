"""word2vec through gensim, the maintained implementation (not rewritten here).

Mikolov et al., 2013, "Efficient Estimation of Word Representations in Vector Space" (CBOW
and skip-gram) and "Distributed Representations of Words and Phrases and their
Compositionality" (negative sampling, hierarchical softmax, subsampling of frequent words).
This module maps ptm's settings onto ``gensim.models.Word2Vec`` and turns the result into
a :class:`~ptm_classic.static.vectors.VectorTable`.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any

from ptm_classic.static.corpus import Sentences
from ptm_classic.static.vectors import VectorTable, require_gensim

logger = logging.getLogger(__name__)

ARCHITECTURES = ("skipgram", "cbow")


def stable_hash(text: str) -> int:
    """CRC-32 of ``text``: gensim seeds each word's initial vector with ``hashfxn(word +
    seed)``; Python's ``hash`` changes between processes, this does not."""
    return zlib.crc32(text.encode("utf-8"))


def train_word2vec(
    sentences: Sentences,
    *,
    architecture: str = "skipgram",
    dim: int = 100,
    window: int = 5,
    min_count: int = 5,
    negative: int = 5,
    hierarchical_softmax: bool = False,
    sample: float = 1e-3,
    ns_exponent: float = 0.75,
    alpha: float = 0.025,
    min_alpha: float = 0.0001,
    epochs: int = 5,
    workers: int = 1,
    seed: int = 0,
    max_vocab_size: int | None = None,
) -> VectorTable:
    """Train word2vec with gensim and return its word vectors.

    Args:
        sentences: a restartable stream of word lists (e.g.
            :class:`~ptm_classic.static.corpus.SentenceCorpus`, or a list of lists).
        architecture: ``"skipgram"`` (predict the context from the word) or ``"cbow"``
            (predict the word from the mean of its context).
        dim: vector size.
        window: the largest distance between the word and a context word (gensim samples
            the effective window in ``[1, window]`` per word, as the paper).
        min_count: ignore words seen fewer times.
        negative: noise words per positive pair (negative sampling); 0 turns it off.
        hierarchical_softmax: use the Huffman-tree softmax (with ``negative=0`` alone).
        sample: subsampling threshold ``t`` of frequent words (0 = off).
        ns_exponent: the unigram distribution's exponent for noise words (0.75).
        alpha: initial learning rate, decaying linearly to ``min_alpha``.
        min_alpha: final learning rate.
        epochs: passes over the corpus.
        workers: training threads (1 gives a reproducible result for a seed).
        seed: seeds the initial vectors and the sampling.
        max_vocab_size: prune the vocabulary while counting to stay under this many types.

    Returns:
        :class:`VectorTable` with method ``word2vec-sg`` or ``word2vec-cbow``, its
        metadata holding the settings and the loss of each epoch (``epoch_losses``).

    Raises:
        ValueError: an unknown architecture, or neither negative sampling nor
            hierarchical softmax.
        ImportError: gensim is missing (``pip install 'ptm-classic[static]'``).
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"model.architecture={architecture!r}; valid: {', '.join(ARCHITECTURES)}")
    if negative <= 0 and not hierarchical_softmax:
        raise ValueError(
            "word2vec needs an output layer: set model.negative > 0 (negative sampling) or "
            "model.hierarchical_softmax=true"
        )
    require_gensim()
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec

    class EpochLoss(CallbackAny2Vec):
        """gensim's loss is cumulative within a train() call: keep per-epoch differences."""

        def __init__(self) -> None:
            self.losses: list[float] = []
            self._seen = 0.0
            self._start = time.perf_counter()

        def on_epoch_end(self, model: Any) -> None:
            total = float(model.get_latest_training_loss())
            self.losses.append(total - self._seen)
            self._seen = total
            logger.info(
                "word2vec epoch %d/%d: loss %.4g (%.1f s)",
                len(self.losses),
                epochs,
                self.losses[-1],
                time.perf_counter() - self._start,
            )

    tracker = EpochLoss()
    model = Word2Vec(
        sentences=sentences,
        vector_size=dim,
        window=window,
        min_count=min_count,
        sg=1 if architecture == "skipgram" else 0,
        hs=1 if hierarchical_softmax else 0,
        negative=negative,
        sample=sample,
        ns_exponent=ns_exponent,
        alpha=alpha,
        min_alpha=min_alpha,
        epochs=epochs,
        workers=workers,
        seed=seed,
        hashfxn=stable_hash,
        max_vocab_size=max_vocab_size,
        compute_loss=True,
        callbacks=[tracker],
    )
    method = "word2vec-sg" if architecture == "skipgram" else "word2vec-cbow"
    settings = {
        "architecture": architecture,
        "window": window,
        "min_count": min_count,
        "negative": negative,
        "hierarchical_softmax": hierarchical_softmax,
        "sample": sample,
        "epochs": epochs,
        "seed": seed,
        "gensim_version": require_gensim().__version__,
    }
    return VectorTable.from_keyed_vectors(
        model.wv,
        method,
        {
            "settings": settings,
            "epoch_losses": tracker.losses,
            "corpus_words": int(model.corpus_total_words),
        },
    )


__all__ = ["ARCHITECTURES", "stable_hash", "train_word2vec"]
