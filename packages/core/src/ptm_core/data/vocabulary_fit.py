"""Which tokenizer a run uses, where it came from, and how well it fits the data.

A vocabulary trained on other text maps every word it lacks to ``[UNK]``: the bundled
2,240-token sample vocabulary leaves 14 % of real English text unknown, and a model cannot
learn or predict what it never sees. The share is measured on the tokenised corpus itself
(evenly spaced documents, a bounded number of tokens), so it costs milliseconds on any size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptm_core.data.token_store import TokenStore

logger = logging.getLogger(__name__)

#: Above this share of ``[UNK]`` tokens the run warns.
UNKNOWN_LIMIT = 0.01
#: Documents and tokens read to measure the share.
SAMPLE_DOCUMENTS = 2_000
SAMPLE_TOKENS = 1_000_000


@dataclass(frozen=True)
class UnknownShare:
    """``[UNK]`` tokens among the tokens read.

    Args:
        unknown: ``[UNK]`` ids read.
        tokens: token ids read.
    """

    unknown: int
    tokens: int

    @property
    def share(self) -> float:
        """Fraction of unknown tokens (0 when nothing was read)."""
        return self.unknown / self.tokens if self.tokens else 0.0


def unknown_share(
    store: TokenStore,
    unk_id: int,
    *,
    documents: int = SAMPLE_DOCUMENTS,
    tokens: int = SAMPLE_TOKENS,
) -> UnknownShare:
    """Count ``unk_id`` over up to ``documents`` evenly spaced documents, ``tokens`` in all."""
    total = store.num_documents
    if total == 0:
        return UnknownShare(0, 0)
    picked = np.unique(np.linspace(0, total - 1, num=min(documents, total)).astype(np.int64))
    per_document = max(1, tokens // len(picked))
    unknown = read = 0
    for doc in picked:
        bounds = store.sentence_offsets(int(doc))
        start = int(bounds[0])
        ids = store.tokens(start, min(int(bounds[-1]), start + per_document))
        unknown += int(np.count_nonzero(ids == unk_id))
        read += len(ids)
    return UnknownShare(unknown, read)


def report_tokenizer(
    store: TokenStore,
    unk_id: int,
    vocab_size: int,
    source: str,
    *,
    limit: float = UNKNOWN_LIMIT,
) -> UnknownShare:
    """Log the tokenizer a run uses and where it came from; warn above ``limit`` ``[UNK]``.

    Args:
        store: the corpus tokenised with it.
        unk_id: its ``[UNK]`` id.
        vocab_size: its size.
        source: where it came from, in words (``"given: data.tokenizer=<path>"``).
        limit: warn above this share of unknown tokens.

    Returns:
        The measured share.
    """
    found = unknown_share(store, unk_id)
    logger.info(
        "tokenizer: %s tokens, %s; [UNK] %.2f%% of %s tokens read",
        f"{vocab_size:,}",
        source,
        100 * found.share,
        f"{found.tokens:,}",
    )
    if found.share > limit:
        logger.warning(
            "%.1f%% of the tokens read are [UNK] (%s of %s): the tokenizer (%s) does not fit "
            "this corpus, and the model never sees those words. Leave data.tokenizer=null to "
            "train a vocabulary on the corpus, or give one trained on text like it",
            100 * found.share,
            f"{found.unknown:,}",
            f"{found.tokens:,}",
            source,
        )
    return found


def tokenizer_source(
    given: str | Path | None, prepared: str | Path | None, corpus: object, vocab_size: int
) -> str:
    """Where a run's tokenizer comes from, in words, for :func:`report_tokenizer`."""
    if prepared is not None:
        return f"the one {prepared} was prepared with"
    if given is not None:
        return f"given ({given})"
    return f"trained on the training data ({corpus}, vocab_size={vocab_size}: no tokenizer given)"


__all__ = [
    "SAMPLE_DOCUMENTS",
    "SAMPLE_TOKENS",
    "UNKNOWN_LIMIT",
    "UnknownShare",
    "report_tokenizer",
    "tokenizer_source",
    "unknown_share",
]
