"""MLM stream rows and TLM pair rows built per index from memory-mapped token shards.

The rows are the same dicts as :func:`~ptm_multilingual.batches.build_mlm_streams` and
:func:`~ptm_multilingual.batches.build_tlm_example` give, built when indexed from a
prepared store (:mod:`ptm_multilingual.prepared_data`), so a corpus far larger than memory
trains with flat memory and the batches equal those of the in-memory path.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ptm_core.data.layouts import LazyRows
from ptm_core.data.prepared import PreparedCorpus, shard_file
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.batches import build_tlm_example, mlm_stream_row


class MappedShards:
    """The shards of a prepared store memory-mapped as plain arrays, for reads per row.

    :class:`PreparedCorpus` answers any :class:`~ptm_core.data.token_store.TokenStore`
    query; rows here need only "tokens ``[a, b)`` of the store" and "sentence ``i``", and
    ask them tens of times per batch, so this reads the same files (after
    :meth:`PreparedCorpus.open` checked them) with plain ``ndarray`` views and ``bisect``
    over per-shard bases: about 20x less overhead per read than going through
    ``numpy.memmap`` slicing and ``searchsorted``. At most 256 shards stay mapped; the
    object pickles without its maps (DataLoader workers map what they read).

    Args:
        store: an opened (checked) prepared store.
    """

    _OPEN = 256

    def __init__(self, store: PreparedCorpus) -> None:
        self.directory = store.directory
        self.dtype = store.dtype
        kept = [s for s in store.manifest["shards"] if s["tokens"] > 0]
        self.names = [s["name"] for s in kept]
        self.token_bases = [0]
        self.sentence_bases = [0]
        for shard in kept:
            self.token_bases.append(self.token_bases[-1] + int(shard["tokens"]))
            self.sentence_bases.append(self.sentence_bases[-1] + int(shard["sentences"]))
        self._maps: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()

    @property
    def num_tokens(self) -> int:
        return self.token_bases[-1]

    @property
    def num_sentences(self) -> int:
        return self.sentence_bases[-1]

    def _shard(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        found = self._maps.get(index)
        if found is None:
            name = self.names[index]
            tokens = np.memmap(shard_file(self.directory, name, "tokens"), self.dtype, mode="r")
            sentences = np.load(shard_file(self.directory, name, "sentences.npy"), mmap_mode="r")
            found = (tokens.view(np.ndarray), sentences.view(np.ndarray))
            self._maps[index] = found
            if len(self._maps) > self._OPEN:
                self._maps.popitem(last=False)
        else:
            self._maps.move_to_end(index)
        return found

    def read(self, start: int, stop: int) -> np.ndarray:
        """Token ids in ``[start, stop)`` of the store (across shards), ``(stop - start,)``."""
        parts = []
        while start < stop:
            index = bisect.bisect_right(self.token_bases, start) - 1
            base = self.token_bases[index]
            end = min(stop, self.token_bases[index + 1])
            parts.append(self._shard(index)[0][start - base : end - base])
            start = end
        if not parts:
            return np.zeros(0, dtype=self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def sentence(self, index: int) -> np.ndarray:
        """Token ids of sentence ``index`` of the store."""
        shard = bisect.bisect_right(self.sentence_bases, index) - 1
        tokens, offsets = self._shard(shard)
        local = index - self.sentence_bases[shard]
        return tokens[int(offsets[local]) : int(offsets[local + 1])]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_maps"] = OrderedDict()
        return state


class ShardedStream(MappedShards):
    """One language's token stream: the tokens of its prepared store read as one array.

    The stream of a monolingual store is every sentence followed by ``</s>`` (the prepared
    sentences already end with it), so a range of the stream may cross shards.

    Args:
        store: the language's prepared store.
    """

    def chunks(self, size: int = 2**20) -> Iterator[np.ndarray]:
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

    Pair ``i`` is sentence ``i`` of each side's prepared store (one per document, ending with
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
        if source.num_sentences != target.num_sentences:
            raise ValueError(
                f"{source.directory} holds {source.num_sentences} sentences but "
                f"{target.directory} holds {target.num_sentences}; the sides are misaligned, "
                "delete the prepared corpus folder and run again"
            )
        self.source = MappedShards(source)
        self.target = MappedShards(target)
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.vocab = vocab
        self.max_length = max_length

    def __len__(self) -> int:
        return self.source.num_sentences

    def _build(self, index: int) -> dict[str, Any]:
        # Each side ends with </s>, which build_tlm_example adds back after truncating.
        return build_tlm_example(
            self.source.sentence(index)[:-1].tolist(),
            self.target.sentence(index)[:-1].tolist(),
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
