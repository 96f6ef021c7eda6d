"""Tokenised documents as flat arrays: what example layouts read, in memory or memory-mapped.

A :class:`TokenStore` holds every token id of a corpus in one global id space, with the
sentence and document boundaries as offsets into it (Megatron-LM's ``.bin``/``.idx`` idea).
Example layouts (single segments, NSP/SOP pairs, packing) plan *spans* of global token
offsets from the boundaries alone, and read the ids of one example when it is asked for,
so a corpus far larger than memory trains with flat memory.

Two implementations share this contract: :class:`InMemoryTokenStore` (tokenised documents
held as numpy arrays: tests, evaluation, small corpora) and the prepared dataset that
``ptm prepare`` writes (:mod:`ptm_core.data.prepared`: memory-mapped shards).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TokenStore(Protocol):
    """Documents of sentences of token ids, addressed by global token offsets.

    Offsets count tokens from the start of the first document of the first shard. A
    document's tokens are contiguous; empty sentences and empty documents are never stored.
    """

    @property
    def num_documents(self) -> int:
        """Documents in the store (each holds at least one non-empty sentence)."""
        ...

    @property
    def num_tokens(self) -> int:
        """Token ids in the store."""
        ...

    def sentence_offsets(self, document: int) -> np.ndarray:
        """Global token offsets of ``document``'s sentence boundaries.

        Returns:
            ``int64 (n + 1,)`` for ``n`` sentences: sentence ``i`` spans
            ``[out[i], out[i + 1])``.
        """
        ...

    def document_offsets(self) -> Iterator[np.ndarray]:
        """Global token offsets of document boundaries, in chunks (one per shard).

        Yields:
            ``int64 (k + 1,)`` arrays: document ``j`` of the chunk spans
            ``[chunk[j], chunk[j + 1])``; chunks follow each other in document order.
        """
        ...

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Token ids in ``[start, stop)``, a range inside one document (``int64`` or narrower)."""
        ...

    def sentence_starts(self, start: int, stop: int) -> np.ndarray:
        """Global offsets of the sentences that begin in ``[start, stop)``, a range inside
        one document (a row's tokens): what a row needs to know where its sentences are.

        Returns:
            ``int64 (k,)``, increasing; ``start`` is in it only when a sentence begins there.
        """
        ...


class InMemoryTokenStore:
    """A :class:`TokenStore` over tokenised documents held in memory.

    Args:
        documents: documents as sentences of token ids; empty sentences and documents
            left empty by that are dropped, as ``ptm prepare`` drops them.
    """

    def __init__(self, documents: Sequence[Sequence[Sequence[int]]]) -> None:
        lengths: list[int] = []
        per_document: list[int] = [0]
        for document in documents:
            kept = [len(s) for s in document if len(s)]
            if kept:
                lengths.extend(kept)
                per_document.append(per_document[-1] + len(kept))
        self._sentence_bounds = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self._sentence_bounds[1:])
        self._document_sentences = np.asarray(per_document, dtype=np.int64)
        flat = [t for document in documents for s in document if len(s) for t in s]
        self._tokens = np.asarray(flat, dtype=np.int64)

    @property
    def num_documents(self) -> int:
        return len(self._document_sentences) - 1

    @property
    def num_tokens(self) -> int:
        return len(self._tokens)

    def sentence_offsets(self, document: int) -> np.ndarray:
        first, last = self._document_sentences[document], self._document_sentences[document + 1]
        return self._sentence_bounds[first : last + 1]

    def document_offsets(self) -> Iterator[np.ndarray]:
        yield self._sentence_bounds[self._document_sentences]

    def tokens(self, start: int, stop: int) -> np.ndarray:
        return self._tokens[start:stop]

    def sentence_starts(self, start: int, stop: int) -> np.ndarray:
        return starts_in_range(self._sentence_bounds, start, stop)


def starts_in_range(bounds: np.ndarray, start: int, stop: int) -> np.ndarray:
    """The entries of increasing sentence ``bounds`` that lie in ``[start, stop)``."""
    first, last = np.searchsorted(bounds, [start, stop], side="left")
    return np.asarray(bounds[first:last], dtype=np.int64)
