"""Contiguous token streams and truncated-BPTT batches for recurrent language models.

A recurrent LM (AWD-LSTM, Merity et al., 2018; ULMFiT's pre-training) reads the corpus as
one long stream: documents one after the other, a separator id after each, cut into
``batch_size`` contiguous rows ("batchify"); window ``i`` of every row continues window
``i - 1``, so the hidden state can be carried from one batch to the next.

- :class:`LMTokenStream`: the stream over a :class:`~ptm_core.data.token_store.TokenStore`
  (a prepared, memory-mapped corpus from ``ptm prepare``): only the document boundaries
  are held in memory, tokens are read per window.
- :class:`BPTTBatches`: a deterministic, restartable :class:`~ptm_core.training.protocols.
  BatchSource` of ``(B, L)`` windows, with AWD-LSTM's variable BPTT length as an option.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import torch

from ptm_core.data.token_store import TokenStore
from ptm_core.seeding import derive_seed


class LMTokenStream:
    """A token store read as one stream: each document's tokens, then ``separator_id``.

    Args:
        store: the corpus (``PreparedCorpus`` or ``InMemoryTokenStore``).
        separator_id: the id after every document (the tokenizer's ``[SEP]``: the
            ``<eos>`` of word-level LM corpora).

    Attributes:
        length: stream positions: ``store.num_tokens + store.num_documents``.
    """

    def __init__(self, store: TokenStore, separator_id: int) -> None:
        self.store = store
        self.separator_id = separator_id
        chunks = list(store.document_offsets())
        if not chunks:
            bounds = np.zeros(1, dtype=np.int64)
        else:
            bounds = np.concatenate([c[:-1] for c in chunks] + [chunks[-1][-1:]])
        self._bounds = bounds.astype(np.int64)  # (D + 1,) global token offsets
        num_docs = len(self._bounds) - 1
        # Stream position of each document's first token: one separator per earlier document.
        self._starts = self._bounds[:-1] + np.arange(num_docs, dtype=np.int64)
        self.length = int(self._bounds[-1]) + num_docs

    def __len__(self) -> int:
        return self.length

    def read(self, start: int, stop: int) -> np.ndarray:
        """Ids at stream positions ``[start, stop)`` as ``int64 (stop - start,)``."""
        if not 0 <= start <= stop <= self.length:
            raise IndexError(f"stream range [{start}, {stop}) outside [0, {self.length})")
        out = np.empty(stop - start, dtype=np.int64)
        doc = int(np.searchsorted(self._starts, start, side="right")) - 1
        pos = start
        while pos < stop:
            first, end = int(self._bounds[doc]), int(self._bounds[doc + 1])
            doc_start = int(self._starts[doc])
            offset = pos - doc_start  # 0 .. doc length (== length: the separator)
            take = min(stop - pos, end - first - offset)
            if take > 0:
                out[pos - start : pos - start + take] = self.store.tokens(
                    first + offset, first + offset + take
                )
                pos += take
            if pos < stop:  # the separator after this document
                out[pos - start] = self.separator_id
                pos += 1
                doc += 1
        return out


class BPTTBatches:
    """Truncated-BPTT windows over ``stream[start:stop]`` cut into ``batch_size`` rows.

    Row ``r`` is the contiguous span ``[start + r * R, start + (r + 1) * R)`` with ``R =
    (stop - start) // batch_size`` (the remainder is dropped, as AWD-LSTM's ``batchify``
    does). Window ``i`` yields ``input_ids`` = tokens ``[p_i, p_i + L_i)`` of every row and
    ``labels`` = tokens ``[p_i + 1, p_i + L_i + 1)``, and ``reset`` (True for the first
    window of an epoch). The order never changes between epochs: the hidden state of row
    ``r`` must flow into the next window of row ``r``.

    With ``variable_length`` (Merity et al., 2018, section 4.4), window lengths are drawn
    per epoch from a generator seeded by ``(seed, epoch)``: ``L = bptt`` with probability
    0.95 else ``bptt / 2``, then ``L ~ N(L, 5)``, at least 5. The number of windows per
    epoch stays ``(R - 1) // bptt``; lengths are scaled down when their sum would pass the
    row's end, and the tail of a row left over in an epoch is skipped. The paper also
    rescales the learning rate by ``L / bptt``; here the Trainer's schedule is kept.

    Args:
        stream: the token stream.
        batch_size: rows ``B``.
        bptt: window length (AWD-LSTM: 70).
        start: first stream position used.
        stop: end of the span (default the stream's end).
        variable_length: draw window lengths as above.
        seed: seed of the variable lengths.

    Raises:
        ValueError: the span is too short for one window of two tokens per row.
    """

    def __init__(
        self,
        stream: LMTokenStream,
        batch_size: int,
        bptt: int,
        *,
        start: int = 0,
        stop: int | None = None,
        variable_length: bool = False,
        seed: int = 0,
    ) -> None:
        if batch_size < 1 or bptt < 1:
            raise ValueError(f"batch_size and bptt must be >= 1, got {batch_size}, {bptt}")
        stop = len(stream) if stop is None else stop
        self.stream = stream
        self.batch_size = batch_size
        self.bptt = bptt
        self.start = start
        self.row_length = (stop - start) // batch_size
        if self.row_length < 2:
            raise ValueError(
                f"{stop - start} stream tokens cannot fill {batch_size} rows of at least 2 "
                "tokens; lower data.batch_size or use a larger corpus"
            )
        self.variable_length = variable_length
        self.seed = seed

    @property
    def batches_per_epoch(self) -> int:
        span = self.row_length - 1
        if self.variable_length:
            return max(1, span // self.bptt)
        return math.ceil(span / self.bptt)

    def windows(self, epoch: int) -> list[tuple[int, int]]:
        """``(position in the row, length)`` of every window of ``epoch``."""
        span = self.row_length - 1
        if not self.variable_length:
            return [(p, min(self.bptt, span - p)) for p in range(0, span, self.bptt)]
        rng = np.random.default_rng(derive_seed(self.seed, "bptt", epoch))
        n = self.batches_per_epoch
        base = np.where(rng.random(n) < 0.95, self.bptt, self.bptt / 2)
        lengths = np.maximum(5, rng.normal(base, 5).astype(np.int64))
        if lengths.sum() > span:
            lengths = np.maximum(1, (lengths * span) // lengths.sum())
        positions = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        out = []
        for p, length in zip(positions.tolist(), lengths.tolist(), strict=True):
            p = min(int(p), span - 1)
            out.append((p, max(1, min(int(length), span - p))))
        return out

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        windows = self.windows(epoch)
        for index in range(start, len(windows)):
            position, length = windows[index]
            rows = np.stack(
                [
                    self.stream.read(base + position, base + position + length + 1)
                    for base in (self.start + r * self.row_length for r in range(self.batch_size))
                ]
            )
            ids = torch.from_numpy(rows)  # (B, L + 1)
            yield {
                "input_ids": ids[:, :-1].contiguous(),
                "labels": ids[:, 1:].contiguous(),
                "reset": torch.tensor(index == 0),
            }
