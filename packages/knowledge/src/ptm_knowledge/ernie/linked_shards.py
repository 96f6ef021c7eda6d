"""One shard of a prepared linked corpus: read a piece of the JSONL, tokenise, annotate.

:func:`prepare_linked_shard` is a pure function of its :class:`LinkedShardTask` (it runs
in this process or in core's shard worker pool): it streams the piece's lines, validates
them as :func:`~ptm_knowledge.linking.read_linked_corpus` does, tokenises the sentences
in batches with offsets, and appends the token ids, the unit columns and the mention table
to the shard's files under temporary names; only a complete shard is renamed into place,
its record last. Layout: :mod:`ptm_knowledge.ernie.prepared`.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import json
import os
import re
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ptm_core.atomic import atomic_write_text
from ptm_core.data.prepared import (
    RECORD_SUFFIX,
    SHARD_FILES,
    SHARDS_DIR,
    TOKENIZER_DIR,
    PreparedDataError,
    shard_file,
)
from ptm_core.data.shard_writer import OffsetsFile, tokenizer_sha256
from ptm_core.data.sources import Piece, stream_lines
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_knowledge.ernie.examples import knowledge_units
from ptm_knowledge.ernie.phrases import PhraseExtractor
from ptm_knowledge.linking.corpus import LinkedCorpusError, LinkedDocument, read_linked_corpus

# Extra files of a shard, by the key their digest has in the shard's sha256 record.
ERNIE_FILES = ("entity_units", "phrase_units", "mentions", "entities.json")
UNIT_DTYPE = np.dtype(np.int32)
MENTION_DTYPE = np.dtype(np.int64)
# Lines validated per call of the linked-corpus reader (a scratch file of about this size).
_BATCH_BYTES = 2**20
# Documents tokenised per call.
_BATCH_DOCUMENTS = 256


# ---------------------------------------------------------------------- reading input


def iter_piece_linked_documents(piece: Piece, scratch: Path) -> Iterator[LinkedDocument]:
    """Stream the validated documents of one piece of a linked-corpus JSONL file.

    Lines are validated in batches of about a megabyte by
    :func:`~ptm_knowledge.linking.read_linked_corpus` itself (one scratch file per batch
    in ``scratch``), so every rule of the spec applies and errors name the input file and
    its line. (The linking package has no per-record parser to call instead.)

    Raises:
        LinkedCorpusError | CorpusError: the first bad line, as ``<file>:<line>``.
    """
    for _, document in iter_numbered_documents(piece, scratch):
        yield document


_FIRST_ON = re.compile(r"first on line (\d+)")


def _validated(
    path: Path, numbers: list[int], texts: list[str], scratch: Path
) -> list[LinkedDocument]:
    tmp = scratch / f".batch-{os.getpid()}-{secrets.token_hex(4)}.jsonl.tmp"
    try:
        tmp.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        return read_linked_corpus(tmp)
    except LinkedCorpusError as err:
        line = numbers[err.line - 1] if err.line else None
        problem = _FIRST_ON.sub(
            lambda m: f"first on line {numbers[int(m.group(1)) - 1]}", err.problem
        )
        raise LinkedCorpusError(path, line, err.field, problem, err.fix) from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def iter_linked_sentences(
    pieces: Sequence[Piece], scratch: Path, limit: int | None = None
) -> Iterator[str]:
    """The sentences of the pieces in order, stopping after ``limit`` UTF-8 bytes."""
    used = 0
    for piece in pieces:
        for document in iter_piece_linked_documents(piece, scratch):
            for sentence in document.sentences:
                yield sentence
                used += len(sentence.encode("utf-8"))
                if limit is not None and used >= limit:
                    return


# ---------------------------------------------------------------------- writing a shard


@dataclass(frozen=True)
class LinkedShardTask:
    """Everything one shard depends on; its ``name`` is a hash of it."""

    name: str
    piece: Piece
    output_dir: str
    tokenizer_sha256: str
    dtype: str
    phrases: PhraseExtractor | None = None


class _Column:
    """A raw binary column appended batch by batch, hashed as written."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.handle: IO[bytes] = open(path, "wb")  # noqa: SIM115 (closed in finish/close)
        self.digest = hashlib.sha256()
        self.count = 0

    def write(self, array: np.ndarray) -> None:
        data = np.ascontiguousarray(array).tobytes()
        self.handle.write(data)
        self.digest.update(data)
        self.count += len(array)

    def finish(self) -> str:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        return self.digest.hexdigest()

    def close(self) -> None:
        self.handle.close()


class _ShardState:
    """Running counters of one shard: tokens, units and entities seen so far."""

    def __init__(self) -> None:
        self.tokens = 0
        self.next_unit = 0
        self.entities: dict[str, int] = {}
        self.lines: list[int] = []
        self.counts: list[int] = []
        self.text_bytes = 0

    def entity(self, entity_id: str, line: int) -> int:
        index = self.entities.get(entity_id)
        if index is None:
            index = self.entities[entity_id] = len(self.lines)
            self.lines.append(line)
            self.counts.append(0)
        self.counts[index] += 1
        return index


def _annotate_batch(
    documents: Sequence[tuple[int, LinkedDocument]],
    tokenizer: TaskTokenizer,
    phrases: PhraseExtractor | None,
    state: _ShardState,
) -> dict[str, Any]:
    """Token ids, unit columns, mentions and boundaries of a batch of documents.

    The same units and alignment as :func:`~ptm_knowledge.ernie.examples.
    annotate_documents`, with ids local to the shard.
    """
    sentences = [s for _, d in documents for s in d.sentences]
    encodings = tokenizer.encode_batch(sentences) if sentences else []
    ids: list[int] = []
    columns: dict[str, list[int]] = {"phrase_units": [], "entity_units": []}
    mentions: list[tuple[int, int]] = []
    sentence_lengths: list[int] = []
    document_sizes: list[int] = []
    k = 0
    for line, doc in documents:
        by_sentence: list[list[tuple[int, int, str]]] = [[] for _ in doc.sentences]
        for m in doc.mentions:
            if 0 <= m.sentence < len(by_sentence):
                by_sentence[m.sentence].append((m.start, m.end, m.entity_id))
        kept = 0
        for index, text in enumerate(doc.sentences):
            enc = encodings[k]
            k += 1
            state.text_bytes += len(text.encode("utf-8"))
            body = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
            offsets = [enc.offsets[i] for i in body]
            doc_mentions = by_sentence[index]
            # Every mention counts (coverage's "mentions" and "known"), even one on no piece.
            entity_of = [state.entity(e, line) for _, _, e in doc_mentions]
            if not body:
                continue
            per_token, state.next_unit = knowledge_units(
                offsets,
                phrases.phrase_spans(text) if phrases is not None else [],
                [(s, e) for s, e, _ in doc_mentions],
                state.next_unit,
            )
            # align_mentions_to_pieces: the first covered piece, in mention order.
            firsts = _first_pieces(offsets, [(s, e) for s, e, _ in doc_mentions])
            covered = [
                (first, entity)
                for first, entity in zip(firsts, entity_of, strict=True)
                if first is not None
            ]
            covered.sort(key=lambda item: item[0])  # stable: mention order among equals
            mentions.extend((state.tokens + first, entity) for first, entity in covered)
            ids.extend(enc.input_ids[i] for i in body)
            for key in columns:
                columns[key].extend(per_token[key])
            sentence_lengths.append(len(body))
            state.tokens += len(body)
            kept += 1
        if kept:
            document_sizes.append(kept)
    return {
        "ids": ids,
        "columns": columns,
        "mentions": mentions,
        "sentences": sentence_lengths,
        "documents": document_sizes,
    }


def _first_pieces(
    offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
) -> list[int | None]:
    """The first piece overlapping each span, or ``None`` (the rule of
    :func:`~ptm_knowledge.linking.align_mentions_to_pieces`: empty pieces never hold one;
    offsets of one text are non-decreasing, so two binary searches per span)."""
    positions = [i for i, (s, e) in enumerate(offsets) if e > s]
    starts = [offsets[i][0] for i in positions]
    ends = [offsets[i][1] for i in positions]
    out: list[int | None] = []
    for start, end in spans:
        first = bisect.bisect_right(ends, start)
        stop = bisect.bisect_left(starts, end)
        out.append(positions[first] if first < stop else None)
    return out


def prepare_linked_shard(task: LinkedShardTask) -> dict[str, Any]:
    """Tokenise and annotate one piece of a linked corpus into a shard, atomically.

    Returns:
        The shard's record (as core's, plus ``entities``, ``mentions`` and the extra
        files' digests in ``sha256``).

    Raises:
        LinkedCorpusError | CorpusError: a bad line, naming the input file and line.
    """
    root = Path(task.output_dir)
    shards = root / SHARDS_DIR
    found = tokenizer_sha256(root / TOKENIZER_DIR)
    if found != task.tokenizer_sha256:
        raise PreparedDataError(
            root / TOKENIZER_DIR,
            None,
            "sha256",
            "the tokenizer changed while the corpus was being prepared",
            "prepare again (one run per output folder at a time)",
        )
    tokenizer = load_task_tokenizer(root / TOKENIZER_DIR)
    dtype = np.dtype(task.dtype)
    tag = f".{task.name}.{os.getpid()}-{secrets.token_hex(4)}"
    kinds = (*SHARD_FILES, *ERNIE_FILES)
    temporary = {kind: shards / f"{tag}.{kind}.tmp" for kind in kinds}
    sentences = OffsetsFile(shards / f"{tag}.sentences.raw.tmp")
    documents = OffsetsFile(shards / f"{tag}.documents.raw.tmp")
    columns = {
        kind: _Column(temporary[kind]) for kind in ("tokens", "entity_units", "phrase_units")
    }
    mention_file = _Column(temporary["mentions"])
    state = _ShardState()

    def flush(batch: list[tuple[int, LinkedDocument]]) -> None:
        if not batch:
            return
        out = _annotate_batch(batch, tokenizer, task.phrases, state)
        columns["tokens"].write(np.asarray(out["ids"], dtype=dtype))
        for key, values in out["columns"].items():
            columns[key].write(np.asarray(values, dtype=UNIT_DTYPE))
        mention_file.write(np.asarray(out["mentions"], dtype=MENTION_DTYPE).reshape(-1, 2))
        sentences.extend(np.asarray(out["sentences"], dtype=np.int64))
        documents.extend(np.asarray(out["documents"], dtype=np.int64))

    try:
        batch: list[tuple[int, LinkedDocument]] = []
        for document in iter_numbered_documents(task.piece, shards):
            batch.append(document)
            if len(batch) >= _BATCH_DOCUMENTS:
                flush(batch)
                batch = []
        flush(batch)
        hashes = {kind: column.finish() for kind, column in columns.items()}
        hashes["mentions"] = mention_file.finish()
        hashes["sentences.npy"] = sentences.finish(temporary["sentences.npy"])
        hashes["documents.npy"] = documents.finish(temporary["documents.npy"])
        entities = {
            "ids": list(state.entities),
            "lines": state.lines,
            "counts": state.counts,
        }
        data = (json.dumps(entities, ensure_ascii=False) + "\n").encode("utf-8")
        temporary["entities.json"].write_bytes(data)
        hashes["entities.json"] = hashlib.sha256(data).hexdigest()
        for kind in kinds:
            os.replace(temporary[kind], shard_file(root, task.name, kind))
        record = {
            "name": task.name,
            "source": task.piece.to_dict(),
            "documents": documents.count,
            "sentences": sentences.count,
            "tokens": sentences.total,
            "text_bytes": state.text_bytes,
            "dtype": task.dtype,
            "mentions": mention_file.count,
            "entities": len(state.lines),
            "linked_mentions": int(sum(state.counts)),
            "sha256": hashes,
        }
        atomic_write_text(
            shards / f"{task.name}{RECORD_SUFFIX}", json.dumps(record, indent=1) + "\n"
        )
        return record
    finally:
        for column in (*columns.values(), mention_file):
            column.close()
        sentences.close()
        documents.close()
        for path in [*temporary.values(), sentences.raw_path, documents.raw_path]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def iter_numbered_documents(piece: Piece, scratch: Path) -> Iterator[tuple[int, LinkedDocument]]:
    """Validated documents of a piece, each with its line number in the input file."""
    path = Path(piece.path)
    with open(path, "rb") as handle:
        handle.seek(piece.start)
        lines = stream_lines(
            handle, path, line_base=piece.line_base, limit=piece.stop - piece.start
        )
        numbers: list[int] = []
        texts: list[str] = []
        size = 0
        for number, text in lines:
            if not text.strip():
                continue
            numbers.append(number)
            texts.append(text)
            size += len(text) + 1
            if size >= _BATCH_BYTES:
                yield from zip(numbers, _validated(path, numbers, texts, scratch), strict=True)
                numbers, texts, size = [], [], 0
        if texts:
            yield from zip(numbers, _validated(path, numbers, texts, scratch), strict=True)


__all__ = [
    "ERNIE_FILES",
    "LinkedShardTask",
    "iter_linked_sentences",
    "iter_numbered_documents",
    "iter_piece_linked_documents",
    "prepare_linked_shard",
]
