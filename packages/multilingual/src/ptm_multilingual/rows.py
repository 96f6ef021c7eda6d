"""MLM stream rows and TLM pair rows built per index from memory-mapped token shards.

The rows are the same dicts as :func:`~ptm_multilingual.batches.build_mlm_streams` and
:func:`~ptm_multilingual.batches.build_tlm_example` give, built when indexed from a
prepared store (:mod:`ptm_multilingual.prepared_data`), so a corpus far larger than memory
trains with flat memory and the batches equal those of the in-memory path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptm_core.data.layouts import LazyRows
from ptm_core.data.prepared import PreparedCorpus
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.batches import build_tlm_example, mlm_stream_row


class ShardedStream:
    """One language's token stream: the tokens of a prepared store read as one array.

    The stream of a monolingual store is every sentence followed by ``</s>`` (the prepared
    sentences already end with it), so a range of the stream may cross shards; this reads
    such a range piece by piece.

    Args:
        store: the language's prepared store.
    """

    def __init__(self, store: PreparedCorpus) -> None:
        self.store = store
        kept = [s["tokens"] for s in store.manifest["shards"] if s["tokens"] > 0]
        self._bases = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(np.asarray(kept, dtype=np.int64), out=self._bases[1:])

    @property
    def num_tokens(self) -> int:
        return int(self._bases[-1])

    def read(self, start: int, stop: int) -> np.ndarray:
        """Token ids in ``[start, stop)`` of the stream, ``(stop - start,)``."""
        parts = []
        while start < stop:
            shard = int(np.searchsorted(self._bases, start, side="right")) - 1
            end = min(stop, int(self._bases[shard + 1]))
            parts.append(self.store.tokens(start, end))
            start = end
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def chunks(self, size: int = 2**20) -> Any:
        """The stream in consecutive arrays of at most ``size`` tokens."""
        for start in range(0, self.num_tokens, size):
            yield self.read(start, min(start + size, self.num_tokens))


def mlm_row_count(num_tokens: int, stream_length: int) -> int:
    """Rows :func:`~ptm_multilingual.batches.build_mlm_streams` cuts from a stream.

    Rows start every ``stream_length - 1`` tokens; a last piece of one token is dropped
    (with ``<s>`` it would be shorter than 3).
    """
    step = stream_length - 1
    rows = -(-num_tokens // step)
    if rows and num_tokens - (rows - 1) * step < 2:
        rows -= 1
    return rows


class MLMStreamRows(LazyRows):
    """Row ``i`` of a language's MLM stream: ``<s>`` + stream tokens ``[i*s, (i+1)*s)``,
    ``s = stream_length - 1`` (XLM's MLM, Lample & Conneau, 2019, section 3.3).

    Args:
        stream: the language's token stream (sentences each ending with ``</s>``).
        lang_id: its language-embedding id.
        vocab: special ids.
        stream_length: tokens per row.

    Returns (per index):
        the example :func:`~ptm_multilingual.batches.build_mlm_streams` gives there.
    """

    def __init__(
        self, stream: ShardedStream, lang_id: int, vocab: VocabInfo, stream_length: int
    ) -> None:
        if stream_length < 3:
            raise ValueError(f"stream_length must be >= 3, got {stream_length}")
        self.stream = stream
        self.lang_id = lang_id
        self.vocab = vocab
        self.step = stream_length - 1
        self._specials = frozenset(vocab.special_ids)
        self._len = mlm_row_count(stream.num_tokens, stream_length)

    def __len__(self) -> int:
        return self._len

    def _build(self, index: int) -> dict[str, Any]:
        start = index * self.step
        chunk = self.stream.read(start, min(start + self.step, self.stream.num_tokens))
        return mlm_stream_row([self.vocab.cls_id, *chunk.tolist()], self.lang_id, self._specials)


class TLMPairRows(LazyRows):
    """Row ``i`` of a parallel corpus: ``<s> source_i </s> <s> target_i </s>`` (TLM).

    Pair ``i`` is document ``i`` of each side's prepared store (one sentence, ending with
    ``</s>``, which is cut before :func:`~ptm_multilingual.batches.build_tlm_example`
    truncates and adds the specials). Give the stores swapped for the other direction.

    Args:
        source, target: the two sides' stores (same number of documents).
        source_lang, target_lang: language-embedding ids of the sides.
        vocab: special ids.
        max_length: tokens per row (both sentences).
    """

    def __init__(
        self,
        source: PreparedCorpus,
        target: PreparedCorpus,
        source_lang: int,
        target_lang: int,
        vocab: VocabInfo,
        max_length: int,
    ) -> None:
        if source.num_documents != target.num_documents:
            raise ValueError(
                f"{source.directory} holds {source.num_documents} sentences but "
                f"{target.directory} holds {target.num_documents}; the sides are misaligned, "
                "delete the prepared corpus folder and run again"
            )
        self.source = source
        self.target = target
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.vocab = vocab
        self.max_length = max_length

    def __len__(self) -> int:
        return self.source.num_documents

    @staticmethod
    def _side(store: PreparedCorpus, index: int) -> list[int]:
        bounds = store.sentence_offsets(index)
        ids: list[int] = store.tokens(int(bounds[0]), int(bounds[-1]) - 1).tolist()
        return ids

    def _build(self, index: int) -> dict[str, Any]:
        return build_tlm_example(
            self._side(self.source, index),
            self._side(self.target, index),
            self.source_lang,
            self.target_lang,
            self.vocab,
            self.max_length,
        )


class ConcatRows(LazyRows):
    """Several row sequences read as one (corpora of the same language pair).

    Args:
        parts: the sequences, in order.
    """

    def __init__(self, parts: Sequence[Sequence[Any]]) -> None:
        self.parts = list(parts)
        self._bases = np.zeros(len(self.parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in self.parts], out=self._bases[1:])

    def __len__(self) -> int:
        return int(self._bases[-1])

    def _build(self, index: int) -> Any:
        part = int(np.searchsorted(self._bases, index, side="right")) - 1
        return self.parts[part][index - int(self._bases[part])]
