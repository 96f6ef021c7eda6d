"""Example layouts planned as token spans, built one example at a time.

A layout turns a :class:`~ptm_core.data.token_store.TokenStore` into training rows in two
steps, as Megatron-LM's sample index does:

1. **Plan** (once; cached beside a prepared corpus): read only sentence and document
   boundaries and decide every row as spans of global token offsets. A plan is a small
   ``int64`` array, about 40 bytes a row: 2M rows of a 1 GB corpus take 80 MB, and it is
   memory-mapped when read back.
2. **Build** (per index, lazily): read the row's token ids from the store and add the
   special tokens. :class:`SegmentRows` and :class:`SegmentPairRows` are sequences of
   examples that do this in ``__getitem__``.

Both layouts of BERT-style pre-training are here: RoBERTa's DOC-SENTENCES single segments
(:func:`plan_single_segments`) and Google's segment pairs for NSP, SOP and UniLM
(:func:`plan_segment_pairs`). The in-memory builders in :mod:`ptm_core.data.segments` are
this plan followed by building every row, so the raw and prepared paths cannot drift.
"""

from __future__ import annotations

import json
import random
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from ptm_core.atomic import atomic_file
from ptm_core.data.token_store import TokenStore
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo

Example = dict[str, Any]

# Columns of a pair plan.
A_START, A_LEN, B_START, B_LEN, LABEL, A_DOC, B_DOC = range(7)
PAIR_COLUMNS = 7
# Rows a planner gathers before it hands a chunk on: plans are written to the cache chunk by
# chunk, so planning a 10 GB corpus never holds the whole plan (or a Python list of it).
PLAN_CHUNK_ROWS = 1 << 16


def concat_plan(chunks: Iterable[np.ndarray], columns: int) -> np.ndarray:
    """The chunks of a planner as one ``int64 (N, columns)`` array."""
    parts = [np.asarray(chunk, dtype=np.int64).reshape(-1, columns) for chunk in chunks]
    if not parts:
        return np.zeros((0, columns), dtype=np.int64)
    return np.concatenate(parts)


class PlanBuffer:
    """Rows of ``columns`` ints gathered compactly (8 bytes a value), flushed as chunks."""

    def __init__(self, columns: int, chunk_rows: int | None = None) -> None:
        self.columns = columns
        self._limit = (chunk_rows or PLAN_CHUNK_ROWS) * columns
        self._values = array("q")

    def add(self, *row: int) -> np.ndarray | None:
        """Append one row; returns a full chunk to hand on when one is ready."""
        self._values.extend(row)
        if len(self._values) >= self._limit:
            return self.flush()
        return None

    def flush(self) -> np.ndarray:
        """The rows gathered so far (possibly none), as ``int64 (k, columns)``."""
        chunk = np.frombuffer(self._values, dtype=np.int64).reshape(-1, self.columns).copy()
        self._values = array("q")
        return chunk


def trim_counts(
    length_a: int, length_b: int, max_tokens: int, rng: random.Random
) -> tuple[int, int, int, int]:
    """How many tokens BERT's pair truncation cuts from each end of two segments.

    The longer segment loses one token at a time, from the front or the back with equal
    probability, until both fit ``max_tokens`` (``truncate_seq_pair`` of Google's
    ``create_pretraining_data.py``). Only the counts are drawn here, with the same random
    draws, so a huge sentence costs O(n) and no list is copied.

    Returns:
        ``(a_front, a_back, b_front, b_back)``.
    """
    cut = [0, 0, 0, 0]
    while length_a + length_b > max_tokens:
        if length_a > length_b:
            cut[0 if rng.random() < 0.5 else 1] += 1
            length_a -= 1
        else:
            cut[2 if rng.random() < 0.5 else 3] += 1
            length_b -= 1
    return cut[0], cut[1], cut[2], cut[3]


def iter_document_spans(store: TokenStore) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(starts, ends)`` token offsets of the store's documents, chunk by chunk."""
    for bounds in store.document_offsets():
        yield bounds[:-1], bounds[1:]


def plan_single_segments(store: TokenStore, max_length: int) -> np.ndarray:
    """RoBERTa's DOC-SENTENCES rows: full rows of consecutive text that never cross a document.

    A row holds ``max_length - 2`` tokens (``[CLS]`` and ``[SEP]`` added when built), the
    last row of a document what is left; a sentence longer than a row is split across rows.

    Args:
        store: the tokenised corpus.
        max_length: row length including the two special tokens.

    Returns:
        ``int64 (N, 2)``: ``(start, length)`` of each row's tokens, in corpus order.
    """
    return concat_plan(iter_single_segments(store, max_length), 2)


def iter_single_segments(store: TokenStore, max_length: int) -> Iterator[np.ndarray]:
    """:func:`plan_single_segments` chunk by chunk (one chunk per block of documents)."""
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3, got {max_length}")
    budget = max_length - 2
    yield np.zeros((0, 2), dtype=np.int64)  # so an empty store still gives a (0, 2) plan
    for starts, ends in iter_document_spans(store):
        lengths = ends - starts
        rows_per_doc = (lengths + budget - 1) // budget  # (D,)
        first_row = np.repeat(starts, rows_per_doc)
        # Index of each row within its document: 0, 1, ... per document.
        offsets = np.arange(rows_per_doc.sum()) - np.repeat(
            np.cumsum(rows_per_doc) - rows_per_doc, rows_per_doc
        )
        row_start = first_row + offsets * budget
        row_len = np.minimum(budget, np.repeat(ends, rows_per_doc) - row_start)
        yield np.stack([row_start, row_len], axis=1).astype(np.int64, copy=False)


def plan_segment_pairs(
    store: TokenStore,
    max_length: int,
    rng: random.Random,
    *,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> np.ndarray:
    """``[CLS] A [SEP] B [SEP]`` pairs for NSP (Devlin et al., 2019), planned as spans.

    Follows Google's ``create_instances_from_document``: sentences are accumulated into a
    chunk up to a target length (shorter with probability ``short_seq_prob``), A is the
    first ``a_end`` sentences, B the rest. One change makes the label rate exact: the
    label is drawn first, with probability ``random_next_prob`` of "random". The reference
    forces "random" whenever a chunk holds a single sentence, which pushes the negative
    rate above one half; here a true pair is completed by the next sentence or, at a
    document's end, by splitting the sentence at a random token. Random B segments start
    at a random sentence of a *different* document, and the sentences of the chunk not
    used as A go back to be used again. Pairs are truncated as BERT does
    (:func:`trim_counts`); A and B stay contiguous runs of tokens either way.

    Args:
        store: the tokenised corpus.
        max_length: total length including ``[CLS]`` and two ``[SEP]``.
        rng: seeded random source (the same draws as the in-memory builder).
        random_next_prob: probability of a random B.
        short_seq_prob: probability of a target length drawn from ``[2, max_length - 3]``.

    Returns:
        ``int64 (N, 7)``: ``a_start, a_len, b_start, b_len, label (1 = random B),
        a_document, b_document`` per pair.

    Raises:
        ValueError: fewer than two documents while negatives are requested, or
            ``max_length`` too small.
    """
    return concat_plan(
        iter_segment_pairs(
            store,
            max_length,
            rng,
            random_next_prob=random_next_prob,
            short_seq_prob=short_seq_prob,
        ),
        PAIR_COLUMNS,
    )


def iter_segment_pairs(
    store: TokenStore,
    max_length: int,
    rng: random.Random,
    *,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> Iterator[np.ndarray]:
    """:func:`plan_segment_pairs` in chunks of up to :data:`PLAN_CHUNK_ROWS` rows."""
    if max_length < 5:
        raise ValueError(f"max_length must be at least 5 for a segment pair, got {max_length}")
    num_docs = store.num_documents
    if random_next_prob > 0 and num_docs < 2:
        raise ValueError(
            "next-sentence prediction needs at least two non-empty documents for its random "
            f"segments, got {num_docs}; separate documents with a blank line"
        )
    max_tokens = max_length - 3
    rows = PlanBuffer(PAIR_COLUMNS)
    for doc_index in range(num_docs):
        bounds = store.sentence_offsets(doc_index).tolist()  # n + 1 offsets
        sentences = len(bounds) - 1
        target = max_tokens
        if rng.random() < short_seq_prob:
            target = rng.randint(2, max_tokens)
        first = 0  # first sentence of the current chunk
        chunk = 0  # sentences in the chunk
        length = 0
        is_random = False
        i = 0
        while i < sentences:
            if not chunk:
                first = i
                is_random = rng.random() < random_next_prob  # one label per chunk
            chunk += 1
            length += bounds[i + 1] - bounds[i]
            at_end = i == sentences - 1
            need_more = not is_random and chunk < 2 and not at_end
            if (at_end or length >= target) and not need_more:
                a_end = rng.randint(1, chunk - 1) if chunk >= 2 else 1
                a_start, a_len = bounds[first], bounds[first + a_end] - bounds[first]
                if is_random:
                    other = rng.randrange(num_docs - 1)
                    b_doc = other + (other >= doc_index)
                    other_bounds = store.sentence_offsets(b_doc).tolist()
                    start = rng.randrange(len(other_bounds) - 1)
                    wanted = max(target - a_len, 1)
                    stop = start + 1
                    while other_bounds[stop] - other_bounds[start] < wanted:
                        if stop == len(other_bounds) - 1:
                            break
                        stop += 1
                    b_start, b_len = other_bounds[start], other_bounds[stop] - other_bounds[start]
                    i -= chunk - a_end  # unused sentences are used again
                elif chunk >= 2:
                    b_doc = doc_index
                    b_start = bounds[first + a_end]
                    b_len = bounds[first + chunk] - b_start
                else:
                    sentence_len = bounds[first + 1] - bounds[first]
                    if sentence_len < 2:
                        chunk, length = 0, 0
                        i += 1
                        continue
                    cut = rng.randint(1, sentence_len - 1)
                    a_len, b_start, b_len, b_doc = cut, a_start + cut, sentence_len - cut, doc_index
                a_front, a_back, b_front, b_back = trim_counts(a_len, b_len, max_tokens, rng)
                a_len -= a_front + a_back
                b_len -= b_front + b_back
                if a_len and b_len:
                    full = rows.add(
                        a_start + a_front,
                        a_len,
                        b_start + b_front,
                        b_len,
                        int(is_random),
                        doc_index,
                        b_doc,
                    )
                    if full is not None:
                        yield full
                chunk, length = 0, 0
                if target != max_tokens and rng.random() >= short_seq_prob:
                    target = max_tokens
            i += 1
    yield rows.flush()


def draw_swaps(plan: np.ndarray, rng: random.Random, swap_prob: float) -> np.ndarray:
    """SOP labels for a pair plan (ALBERT): 1 = the two segments are swapped.

    Drawn in plan order after the pairs, as the in-memory builder draws them.

    Returns:
        The plan with its label column replaced by the swap draws.
    """
    swapped = plan.copy()
    swapped[:, LABEL] = [int(rng.random() < swap_prob) for _ in range(len(plan))]
    return swapped


def _pair_example(a: list[int], b: list[int], vocab: VocabInfo) -> Example:
    ids = [vocab.cls_id, *a, vocab.sep_id, *b, vocab.sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    special = [0] * len(ids)
    special[0] = special[len(a) + 1] = special[-1] = 1
    return {"input_ids": ids, "token_type_ids": types, "special_tokens_mask": special}


class LazyRows(Sequence[Any]):
    """A sequence whose items are built when indexed (``_build``); slices build each item."""

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self._build(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        return self._build(index)

    def _build(self, index: int) -> Any:
        raise NotImplementedError


class _PlannedRows(LazyRows):
    """A sequence of examples built on demand from a plan over a store."""

    def __init__(self, store: TokenStore, plan: np.ndarray, vocab: VocabInfo) -> None:
        self.store = store
        self.plan = plan
        self.vocab = vocab

    def __len__(self) -> int:
        return len(self.plan)

    def _tokens(self, start: int, length: int) -> list[int]:
        return self.store.tokens(start, start + length).tolist()

    def lengths(self) -> np.ndarray:
        """Row lengths with special tokens, from the plan alone (for packing)."""
        raise NotImplementedError


#: The per-token row key that marks where sentences begin (1) in a row.
SENTENCE_STARTS = "sentence_starts"


class SegmentRows(_PlannedRows):
    """``[CLS] tokens [SEP]`` rows of a single-segment plan (:func:`plan_single_segments`).

    Args:
        store: the tokenised corpus.
        plan: ``(N, 2)`` ``(start, length)`` rows.
        vocab: special ids.
        sentence_starts: also write ``sentence_starts``, one flag per token: 1 on the first
            token of each sentence of the corpus that begins in the row (its sentence
            boundaries, kept by ``ptm prepare``), 0 elsewhere and on ``[CLS]``/``[SEP]``. A
            row that starts inside a sentence has 0 on its first token. Objectives that
            work on whole sentences (GLM's sentence-level task) read it; the plan, and so
            every cached plan, is the same either way.
    """

    def __init__(
        self,
        store: TokenStore,
        plan: np.ndarray,
        vocab: VocabInfo,
        *,
        sentence_starts: bool = False,
    ) -> None:
        super().__init__(store, plan, vocab)
        self.sentence_starts = sentence_starts

    def _build(self, index: int) -> Example:
        start, length = (int(v) for v in self.plan[index])
        ids = [self.vocab.cls_id, *self._tokens(start, length), self.vocab.sep_id]
        special = [0] * len(ids)
        special[0] = special[-1] = 1
        row = {"input_ids": ids, "token_type_ids": [0] * len(ids), "special_tokens_mask": special}
        if self.sentence_starts:
            flags = [0] * len(ids)
            for offset in self.store.sentence_starts(start, start + length).tolist():
                flags[offset - start + 1] = 1  # + 1: after [CLS]
            row[SENTENCE_STARTS] = flags
        return row

    def lengths(self) -> np.ndarray:
        return self.plan[:, 1] + 2


class SegmentPairRows(_PlannedRows):
    """``[CLS] A [SEP] B [SEP]`` rows of a pair plan (:func:`plan_segment_pairs`).

    Args:
        store: the tokenised corpus.
        plan: ``(N, 7)`` pair rows.
        vocab: special ids.
        label_key: batch key of the plan's label column (``"next_sentence_label"``,
            ``"sentence_order_label"``), or ``None`` for no label (UniLM).
        swap_on_label: build ``[CLS] B [SEP] A [SEP]`` where the label is 1 (SOP).
        with_documents: add ``meta_documents`` ``(a_document, b_document)``.
    """

    def __init__(
        self,
        store: TokenStore,
        plan: np.ndarray,
        vocab: VocabInfo,
        *,
        label_key: str | None,
        swap_on_label: bool = False,
        with_documents: bool = True,
    ) -> None:
        super().__init__(store, plan, vocab)
        self.label_key = label_key
        self.swap_on_label = swap_on_label
        self.with_documents = with_documents

    def _build(self, index: int) -> Example:
        a_start, a_len, b_start, b_len, label, a_doc, b_doc = (int(v) for v in self.plan[index])
        a, b = self._tokens(a_start, a_len), self._tokens(b_start, b_len)
        if self.swap_on_label and label:
            a, b = b, a
        example = _pair_example(a, b, self.vocab)
        if self.label_key is not None:
            example[self.label_key] = label
        if self.with_documents:
            example["meta_documents"] = (a_doc, b_doc)
        return example

    def lengths(self) -> np.ndarray:
        return self.plan[:, A_LEN] + self.plan[:, B_LEN] + 3


def plan_packing(lengths: np.ndarray, max_length: int) -> np.ndarray:
    """Greedy packing of consecutive rows into rows of at most ``max_length`` tokens.

    Args:
        lengths: ``(N,)`` row lengths.
        max_length: packed row length.

    Returns:
        ``int64 (G + 1,)`` boundaries: packed row ``g`` holds rows ``[out[g], out[g + 1])``.

    Raises:
        ValueError: a row is longer than ``max_length``.
    """
    too_long = np.flatnonzero(lengths > max_length)
    if len(too_long):
        raise ValueError(
            f"an example of {int(lengths[too_long[0]])} tokens does not fit a packed row of "
            f"{max_length}"
        )
    bounds = [0]
    used = 0
    for index, length in enumerate(lengths.tolist()):
        if used and used + length > max_length:
            bounds.append(index)
            used = 0
        used += length
    if len(lengths):
        bounds.append(len(lengths))
    return np.asarray(bounds, dtype=np.int64)


def cached_plan(
    store: TokenStore,
    kind: str,
    settings: Mapping[str, Any],
    compute: Callable[[], np.ndarray | Iterable[np.ndarray]],
) -> np.ndarray:
    """A plan computed once per store and settings, memory-mapped from then on.

    A store with a ``cache_dir`` (a prepared corpus) keeps plans there as
    ``<kind>-<key>.npy``, so a second run, a resume or another process starts at once; a
    store without one (in memory) computes the plan each time. ``compute`` may return the
    plan or yield it in chunks (the ``iter_*`` planners): chunks are written to the cache
    file as they come, so the plan of a large corpus is never whole in memory.

    Args:
        store: the tokenised corpus.
        kind: the layout's name (file name prefix).
        settings: everything the plan depends on besides the store (lengths, seed, rates).
        compute: builds the plan, whole or in ``int64 (k, columns)`` chunks.

    Returns:
        The plan (read-only and memory-mapped when cached).
    """
    cache_dir = getattr(store, "cache_dir", None)
    if cache_dir is None:
        result = compute()
        return result if isinstance(result, np.ndarray) else _concat_any(result)
    # The store's fingerprint too: a plan is never read against data it was not made from.
    fingerprint = str(getattr(store, "fingerprint", ""))
    key = derive_seed(kind, fingerprint, json.dumps(dict(settings), sort_keys=True))
    path = Path(cache_dir) / f"{kind}-{key:016x}.npy"
    if path.is_file():
        try:
            return np.load(path, mmap_mode="r")
        except (ValueError, OSError):
            pass  # a damaged cache entry is only a cache entry: build it again
    result = compute()
    with atomic_file(path) as tmp:
        write_plan(tmp, [result] if isinstance(result, np.ndarray) else result)
    return np.load(path, mmap_mode="r")


def _concat_any(chunks: Iterable[np.ndarray]) -> np.ndarray:
    parts = [np.asarray(chunk, dtype=np.int64) for chunk in chunks]
    if not parts:
        raise ValueError("a planner yielded no chunk; yield an empty (0, columns) one instead")
    return np.concatenate(parts)


# An .npy header of fixed size, so the row count can be written once the chunks are in.
_NPY_MAGIC = b"\x93NUMPY\x01\x00"
_NPY_HEADER_BYTES = 128


def _npy_header(rows: int, columns: int) -> bytes:
    text = repr({"descr": "<i8", "fortran_order": False, "shape": (rows, columns)})
    pad = _NPY_HEADER_BYTES - len(_NPY_MAGIC) - 2 - len(text) - 1
    return _NPY_MAGIC + struct.pack("<H", len(text) + pad + 1) + (text + " " * pad + "\n").encode()


def write_plan(path: Path, chunks: Iterable[np.ndarray]) -> int:
    """Write ``int64`` chunks of one width as a single ``.npy`` file, one chunk at a time.

    Returns:
        The number of rows written.

    Raises:
        ValueError: the chunks differ in width, or there are none.
    """
    rows, columns = 0, None
    with open(path, "wb") as handle:
        handle.write(b"\0" * _NPY_HEADER_BYTES)
        for chunk in chunks:
            block = np.ascontiguousarray(chunk, dtype="<i8")
            if block.ndim != 2 or (columns is not None and block.shape[1] != columns):
                raise ValueError(
                    f"plan chunks must be 2-D of one width, got {block.shape} after width {columns}"
                )
            columns = block.shape[1]
            handle.write(block.tobytes())
            rows += block.shape[0]
        if columns is None:
            raise ValueError("a planner yielded no chunk; yield an empty (0, columns) one instead")
        handle.seek(0)
        handle.write(_npy_header(rows, columns))
    return rows
