"""How many sentences a corpus's documents hold, and the warning sentence-pair objectives need.

NSP (and SOP, UniLM's pairs, ERNIE's NSP) build their pairs from the sentences of one
document. On documents of one sentence a positive pair is that sentence cut in two and a
negative is two documents joined, so the pair label is visible from the cut alone: NSP
reaches 0.93-0.975 accuracy without learning anything about meaning. The corpus format
(one sentence per line, a blank line between documents) makes this an easy mistake: a
file of one paragraph per line, or no blank lines at all, is read this way.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ptm_core.data.token_store import TokenStore

logger = logging.getLogger(__name__)

#: Documents read to estimate the share (evenly spaced over the corpus).
SAMPLE_DOCUMENTS = 10_000
#: Above this share of one-sentence documents the warning is given ("most documents").
ONE_SENTENCE_LIMIT = 0.5


@dataclass(frozen=True)
class SentenceShape:
    """One-sentence documents among the documents read.

    Args:
        documents: documents read (all of them, or an evenly spaced sample).
        one_sentence: of those, documents of exactly one sentence.
        total_documents: documents in the corpus.
    """

    documents: int
    one_sentence: int
    total_documents: int

    @property
    def share(self) -> float:
        """Fraction of the documents read that hold one sentence (0 for an empty corpus)."""
        return self.one_sentence / self.documents if self.documents else 0.0


def sentence_shape(store: TokenStore, sample: int = SAMPLE_DOCUMENTS) -> SentenceShape:
    """Count one-sentence documents over up to ``sample`` evenly spaced documents."""
    total = store.num_documents
    if total == 0:
        return SentenceShape(0, 0, 0)
    picked = np.unique(np.linspace(0, total - 1, num=min(sample, total)).astype(np.int64))
    single = sum(1 for doc in picked if len(store.sentence_offsets(int(doc))) == 2)
    return SentenceShape(len(picked), single, total)


def warn_one_sentence_documents(
    store: TokenStore, objectives: Sequence[str], *, limit: float = ONE_SENTENCE_LIMIT
) -> SentenceShape:
    """Warn (log) when most documents hold one sentence and a sentence-pair objective runs.

    Args:
        store: the tokenised corpus.
        objectives: the sentence-pair objectives of the run (``["nsp"]``, ``["sop"]``).
        limit: warn above this share of one-sentence documents.

    Returns:
        The counts (also when nothing is warned).
    """
    shape = sentence_shape(store)
    if objectives and shape.share > limit:
        names = ", ".join(name.upper() for name in objectives)
        read = (
            f"{shape.documents:,} documents"
            if shape.documents == shape.total_documents
            else f"{shape.documents:,} of {shape.total_documents:,} documents read"
        )
        logger.warning(
            "%d%% of %s hold one sentence: %s pairs then cut that sentence in two for a "
            "positive and join two documents for a negative, so %s learns where the cut is, "
            "not what follows (accuracy near 1 that means nothing). Put one sentence per "
            "line and a blank line between documents, or train without %s",
            round(100 * shape.share),
            read,
            names,
            names,
            names,
        )
    return shape


__all__ = [
    "ONE_SENTENCE_LIMIT",
    "SAMPLE_DOCUMENTS",
    "SentenceShape",
    "sentence_shape",
    "warn_one_sentence_documents",
]
