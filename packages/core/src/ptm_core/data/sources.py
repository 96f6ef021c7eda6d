"""Inputs of ``ptm prepare``: find the files, cut them into pieces, stream a piece's documents.

Formats (the text ones exactly as :func:`ptm_core.data.corpus.iter_text_corpus` reads them,
through the same validation, :func:`ptm_core.data.corpus.parse_corpus_lines`):

- ``.txt`` (one sentence per line, a blank line between documents) and ``.jsonl`` (one
  ``{"text": ..., "id": ...}`` per line, text split by ``split_sentences``);
- the same compressed: ``.txt.gz``, ``.jsonl.gz`` (gzip), ``.txt.zst``, ``.jsonl.zst``
  (Zstandard, needs ``ptm-core[zstd]``);
- Arrow and Parquet (needs ``ptm-core[arrow]``): a ``datasets.save_to_disk`` folder (its
  ``data-*.arrow`` files, in the order of its ``state.json``), ``.arrow`` files (IPC stream
  or file format) and ``.parquet`` files. Each row of column ``text_field`` is one document,
  split by ``split_sentences``; blank rows are skipped (Hugging Face dumps hold many), a
  null or non-string value is an error naming the row (1-based, in the ``:<line>`` place).

A :class:`Piece` is the part of one file that one shard holds, so one worker reads it alone:

- plain ``.txt``/``.jsonl``: a byte range that starts after a blank line (``.txt``) or a line
  break (``.jsonl``), so no document is cut; its first line number is counted while the file
  is hashed, so errors name the right line;
- compressed files: the whole file (a compressed stream cannot be entered in the middle; a
  dump split into many files prepares in parallel);
- Arrow: a range of record batches; Parquet: a range of row groups.

Every reader streams: a worker holds one line, or one slice of 1,024 rows, at a time.
"""

from __future__ import annotations

import glob
import gzip
import hashlib
import io
import itertools
import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ptm_core.data.compressed import STREAM_ERRORS, ZstdRaw
from ptm_core.data.corpus import (
    CorpusError,
    check_unique_id,
    parse_corpus_lines,
)
from ptm_core.data.lines import decode_line
from ptm_core.data.table_sources import plan_table, table_documents

InputPath = str | os.PathLike[str]


# Suffix (lowercase) -> (kind, compression).
INPUT_SUFFIXES: dict[str, tuple[str, str | None]] = {
    ".txt": ("txt", None),
    ".jsonl": ("jsonl", None),
    ".txt.gz": ("txt", "gz"),
    ".jsonl.gz": ("jsonl", "gz"),
    ".txt.zst": ("txt", "zst"),
    ".jsonl.zst": ("jsonl", "zst"),
    ".arrow": ("arrow", None),
    ".parquet": ("parquet", None),
}
_SUFFIX_LIST = ", ".join(INPUT_SUFFIXES)
_CHUNK = 8 * 2**20  # bytes read at a time while hashing
_TAIL = 256  # bytes of the previous chunk kept so a blank line across chunks is found
_BLANK_LINE = re.compile(rb"\n[ \t]*\r?\n")  # a .txt document ends before the next line


@dataclass(frozen=True)
class InputFile:
    """One input file of a corpus.

    Args:
        path: The file, absolute.
        kind: ``"txt"``, ``"jsonl"``, ``"arrow"`` or ``"parquet"``.
        compression: ``"gz"``, ``"zst"`` or ``None``.
    """

    path: Path
    kind: str
    compression: str | None


@dataclass(frozen=True)
class Piece:
    """The part of one input file that one shard holds.

    Args:
        path: The file, absolute.
        kind: ``"txt"``, ``"jsonl"``, ``"arrow"`` or ``"parquet"``.
        compression: ``"gz"``, ``"zst"`` or ``None``.
        unit: What ``start``/``stop`` count: ``"bytes"`` (plain text), ``"file"`` (a whole
            compressed file: ``[0, size)``), ``"batches"`` (Arrow) or ``"row_groups"``
            (Parquet).
        start: First unit of the piece.
        stop: One past its last unit.
        line_base: Lines (Arrow/Parquet: rows) of the file before ``start``; the piece's
            first line is ``line_base + 1``.
        sha256: SHA-256 of the piece's bytes (plain text; ``None`` otherwise), so that a
            piece keeps its shard when another part of its file is edited.
    """

    path: str
    kind: str
    compression: str | None
    unit: str
    start: int
    stop: int
    line_base: int
    sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The piece as JSON-ready fields (the manifest's ``source`` of a shard)."""
        return {
            "path": self.path,
            "kind": self.kind,
            "compression": self.compression,
            "unit": self.unit,
            "start": self.start,
            "stop": self.stop,
            "line_base": self.line_base,
            "sha256": self.sha256,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Piece:
        """Inverse of :meth:`to_dict`."""
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class ScannedInput:
    """What one pass over an input file learns: its identity and its pieces.

    Args:
        file: The input.
        size: Its size in bytes.
        mtime_ns: Its modification time.
        sha256: The digest of its bytes (as stored, compressed or not).
        pieces: Its pieces, in order.
    """

    file: InputFile
    size: int
    mtime_ns: int
    sha256: str
    pieces: tuple[Piece, ...]


def input_kind(path: Path) -> tuple[str, str | None] | None:
    """``(kind, compression)`` of a file by its suffixes, or ``None`` for another file."""
    name = path.name.lower()
    for suffix, kind in INPUT_SUFFIXES.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return kind
    return None


def find_inputs(inputs: InputPath | Sequence[InputPath]) -> list[InputFile]:
    """Expand files, folders and glob patterns into input files, in reading order.

    A folder gives its input files sorted by name (hidden files and sub-folders skipped), or,
    for a ``datasets.save_to_disk`` folder (``state.json`` + ``dataset_info.json``), its
    Arrow files in the dataset's order. A pattern (``*``, ``?``, ``[``; ``**`` recursive)
    that is not an existing path gives its sorted matches.

    Args:
        inputs: A path or pattern, or a list of them.

    Returns:
        The files, each once.

    Raises:
        CorpusError: Nothing given, a missing path, a pattern without matches, an unknown
            suffix, a folder without inputs, a ``DatasetDict`` folder, or a file given twice.
    """
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    if not items:
        raise CorpusError(
            "<no paths>", None, "path", "no input given", "pass files, folders or patterns"
        )
    files: list[InputFile] = []
    for item in items:
        path = Path(item)
        text = os.fspath(item)
        if not path.exists() and any(c in text for c in "*?["):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise CorpusError(
                    text, None, "path", "no file matches the pattern", "check the pattern"
                )
            for match in matches:
                files.extend(_expand(Path(match), pattern=True))
        else:
            files.extend(_expand(path, pattern=False))
    seen: set[Path] = set()
    for file in files:
        if file.path in seen:
            raise CorpusError(
                file.path, None, "path", "the same file is given twice", "give each file once"
            )
        seen.add(file.path)
    return files


def _expand(path: Path, *, pattern: bool) -> list[InputFile]:
    if path.is_dir():
        if (path / "dataset_dict.json").is_file():
            splits = sorted(p.name for p in path.iterdir() if p.is_dir())
            raise CorpusError(
                path,
                None,
                "path",
                f"a datasets.DatasetDict folder (splits {', '.join(splits)})",
                f"pass one split's folder, e.g. {path / (splits[0] if splits else 'train')}",
            )
        if (path / "state.json").is_file() and (path / "dataset_info.json").is_file():
            return [InputFile(f.resolve(), "arrow", None) for f in _dataset_files(path)]
        found = [
            InputFile(p.resolve(), *kind)
            for p in sorted(path.iterdir())
            if p.is_file() and not p.name.startswith(".") and (kind := input_kind(p))
        ]
        if not found and not pattern:
            raise CorpusError(
                path,
                None,
                "path",
                "folder holds no input file",
                f"put files ending in {_SUFFIX_LIST} in it, or pass the files themselves",
            )
        return found
    if not path.exists():
        raise CorpusError(
            path,
            None,
            "path",
            "input not found",
            "pass an existing file, folder or glob pattern",
        )
    if not path.is_file():
        if pattern:
            return []
        # Reading a FIFO blocks until a writer comes, forever in a batch job.
        raise CorpusError(
            path,
            None,
            "path",
            f"not a regular file (a {_special_kind(path)})",
            "pass a regular file; write a pipe's output to a file first",
        )
    kind = input_kind(path)
    if kind is None:
        if pattern:
            return []  # a pattern such as data/* may also match other files
        raise CorpusError(
            path,
            None,
            "path",
            f"unknown input type {''.join(path.suffixes) or '(no suffix)'!r}",
            f"use one of {_SUFFIX_LIST}, or a datasets.save_to_disk folder",
        )
    return [InputFile(path.resolve(), *kind)]


def _special_kind(path: Path) -> str:
    mode = path.stat().st_mode
    for test, name in (
        (stat.S_ISFIFO, "named pipe (FIFO)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "special file"


def _dataset_files(folder: Path) -> list[Path]:
    """The Arrow files of a ``save_to_disk`` folder, in the dataset's row order."""
    state_path = folder / "state.json"
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        names = [entry["filename"] for entry in state["_data_files"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorpusError(
            state_path,
            None,
            "_data_files",
            f"cannot read the dataset's file list ({type(exc).__name__}: {exc})",
            "save the dataset again with datasets' save_to_disk",
        ) from None
    files = [folder / name for name in names]
    for file in files:
        if not file.is_file():
            raise CorpusError(
                file,
                None,
                "path",
                "listed in state.json but missing",
                "save the dataset again with datasets' save_to_disk",
            )
    return files


# ---------------------------------------------------------------------- scanning


def scan_input(file: InputFile, shard_bytes: int, text_field: str = "text") -> ScannedInput:
    """Hash one input file and cut it into pieces of about ``shard_bytes`` of text.

    Plain text is read once: the same pass hashes it, counts lines and finds the cuts.
    Arrow and Parquet pieces are planned from batch and row-group sizes (of column
    ``text_field``, which must exist).

    Args:
        file: The input.
        shard_bytes: Target bytes of text per piece (a piece ends at the first document
            boundary after it; Arrow/Parquet: after the batch or row group that reaches it).
        text_field: The column (or JSONL key) holding the text.

    Returns:
        The scan.

    Raises:
        CorpusError: The file cannot be read, or an Arrow/Parquet file lacks the column.
    """
    stat = file.path.stat()
    if file.kind in ("txt", "jsonl") and file.compression is None:
        digest, pieces = _scan_plain(file, shard_bytes)
    else:
        digest = file_sha256(file.path)
        if file.kind in ("arrow", "parquet"):
            unit = "batches" if file.kind == "arrow" else "row_groups"
            groups = plan_table(file.path, file.kind, shard_bytes, text_field)
            pieces = [_piece(file, unit, *group) for group in groups]
        else:
            pieces = [_piece(file, "file", 0, stat.st_size, 0)]
    return ScannedInput(file, stat.st_size, stat.st_mtime_ns, digest, tuple(pieces))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in chunks (hashlib releases the GIL meanwhile)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _piece(
    file: InputFile, unit: str, start: int, stop: int, line_base: int, sha256: str | None = None
) -> Piece:
    return Piece(str(file.path), file.kind, file.compression, unit, start, stop, line_base, sha256)


def _scan_plain(file: InputFile, shard_bytes: int) -> tuple[str, list[Piece]]:
    """One pass: the file's SHA-256, its cuts, each piece's SHA-256 and first line."""
    digest = hashlib.sha256()
    part = hashlib.sha256()  # of the current piece
    cuts: list[tuple[int, int]] = [(0, 0)]  # (byte offset, newlines before it)
    parts: list[str] = []
    target = shard_bytes
    position = newlines = 0
    tail = b""
    with open(file.path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            view = memoryview(chunk)
            fed = 0  # bytes of the chunk already in ``part``
            end = position + len(chunk)
            while target < end:
                cut = _next_cut(file.kind, tail, chunk, position, target)
                if cut is None:
                    break
                part.update(view[fed : cut - position])
                fed = cut - position
                parts.append(part.hexdigest())
                part = hashlib.sha256()
                cuts.append((cut, newlines + chunk.count(b"\n", 0, fed)))
                target = cut + shard_bytes
            part.update(view[fed:])
            newlines += chunk.count(b"\n")
            tail = chunk[-_TAIL:]
            position = end
    parts.append(part.hexdigest())
    bounds = [*cuts, (position, newlines)]
    pieces = [
        _piece(file, "bytes", start, stop, line_base, sha)
        for ((start, line_base), (stop, _)), sha in zip(
            itertools.pairwise(bounds), parts, strict=True
        )
        if stop > start
    ]
    return digest.hexdigest(), pieces


def _next_cut(kind: str, tail: bytes, chunk: bytes, position: int, target: int) -> int | None:
    """First document boundary at or after ``target`` that lies in ``chunk``, or ``None``.

    ``.txt``: the start of the line after a blank line; ``.jsonl``: any line start.
    """
    buffer = tail + chunk
    base = position - len(tail)  # file offset of buffer[0]
    begin = max(0, target - base - _TAIL)
    if kind == "jsonl":
        found = buffer.find(b"\n", max(0, target - 1 - base))
        return None if found < 0 else base + found + 1
    match = _BLANK_LINE.search(buffer, begin)
    while match and base + match.end() < target:
        match = _BLANK_LINE.search(buffer, match.start() + 1)
    return None if match is None else base + match.end()


# ---------------------------------------------------------------------- reading


def iter_piece_documents(piece: Piece, text_field: str = "text") -> Iterator[list[str]]:
    """Stream the documents of a piece as lists of sentences, validating as it goes.

    Args:
        piece: The piece.
        text_field: The JSONL key or Arrow/Parquet column holding the text.

    Yields:
        Each document's sentences (may be empty for an Arrow/Parquet row that splits into
        nothing).

    Raises:
        CorpusError: The first bad line or row, with its line (row) number in the file, or
            a duplicate document id within the piece.
    """
    path = Path(piece.path)
    if piece.kind in ("arrow", "parquet"):
        yield from table_documents(
            path, piece.kind, piece.start, piece.stop, piece.line_base, text_field
        )
        return
    with _open_text(piece) as handle:
        limit = piece.stop - piece.start if piece.unit == "bytes" else None
        counted = _CountedLines(stream_lines(handle, path, line_base=piece.line_base, limit=limit))
        seen: dict[str, str] = {}
        documents = parse_corpus_lines(path, counted, piece.kind, text_field=text_field)
        try:
            for document, line in documents:
                check_unique_id(path, document, line, seen)
                yield list(document.sentences)
        except STREAM_ERRORS as exc:
            if piece.compression is None:
                raise
            tool = "gzip -t" if piece.compression == "gz" else "zstd -t"
            where = f"after line {counted.last}" if counted.last else "before its first line"
            raise CorpusError(
                path,
                counted.last + 1,
                "compression",
                f"the .{piece.compression} stream is truncated or corrupt {where} ({exc})",
                f"compress the file again or fetch a complete copy ({tool} {path.name} checks it)",
            ) from None


class _CountedLines:
    """Numbered lines passed through, remembering the last number (for a stream error)."""

    def __init__(self, lines: Iterator[tuple[int, str]]) -> None:
        self._lines = lines
        self.last = 0

    def __iter__(self) -> Iterator[tuple[int, str]]:
        for number, text in self._lines:
            self.last = number
            yield number, text


def _open_text(piece: Piece) -> IO[bytes]:
    path = Path(piece.path)
    if piece.compression == "gz":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if piece.compression == "zst":
        try:
            import zstandard
        except ImportError:
            raise CorpusError(
                path,
                None,
                "path",
                "reading .zst files needs the zstandard package, which is not installed",
                "install it: pip install 'ptm-core[zstd]'",
            ) from None
        return io.BufferedReader(ZstdRaw(path, zstandard), buffer_size=2**20)
    handle = open(path, "rb")  # noqa: SIM115 (the caller's with-block closes it)
    handle.seek(piece.start)
    return handle


def stream_lines(
    handle: IO[bytes], path: Path, *, line_base: int = 0, limit: int | None = None
) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of a binary stream, as :func:`ptm_core.data.lines.iter_lines`.

    Split on ``"\\n"`` only; one ``"\\r"`` before it and a byte-order mark on line 1 are
    dropped; invalid UTF-8 raises :class:`CorpusError` naming the line.

    Args:
        handle: The stream, at the start of a line.
        path: The file, for messages.
        line_base: Lines before the stream's position (the first line yielded is
            ``line_base + 1``).
        limit: Stop after this many bytes (at a line end); ``None`` reads to the end.

    Yields:
        ``(1-based line number in the file, line text without its line ending)``.
    """
    number = line_base
    remaining = limit
    path = Path(path)  # once: a Path per line was 10% of `ptm prepare`'s time
    for raw in handle:
        if remaining is not None:
            if remaining <= 0:
                break
            remaining -= len(raw)
        number += 1
        yield number, decode_line(raw, path, number, CorpusError)


__all__ = [
    "INPUT_SUFFIXES",
    "InputFile",
    "Piece",
    "ScannedInput",
    "file_sha256",
    "find_inputs",
    "input_kind",
    "iter_piece_documents",
    "scan_input",
    "stream_lines",
]
