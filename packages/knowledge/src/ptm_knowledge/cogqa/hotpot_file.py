"""HotpotQA-format files read lazily: one streaming pass validates, then records by index.

HotpotQA's train file is one 540 MB JSON list on a single line; parsing it whole holds
several GB of Python objects. :func:`open_hotpot_json` decodes the list one record at a
time from 1 MiB binary chunks (memory: the largest record plus a chunk), validates every
record with the same checks and ``file:line`` messages as before, keeps each record's byte
span and line (24 bytes) and returns a :class:`MultiHopFile` that parses record ``i`` when
it is asked for. JSON Lines files (one record per line) are read the same way.
"""

from __future__ import annotations

import codecs
import hashlib
import json
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from ptm_core.data.file_records import FileRecords
from ptm_knowledge.cogqa.examples import (
    MultiHopDataError,
    MultiHopExample,
    field_error,
    line_error,
    parse_record,
)

CHUNK = 1 << 20
_WHITESPACE = " \t\r\n"
_REENCODE = "re-encode the file as UTF-8 (e.g. iconv -f <its encoding> -t UTF-8)"
_DECODER = json.JSONDecoder()


class _Stream:
    """Decoded text of a binary file, read in chunks and consumed from the front.

    ``text[pos:]`` is what is left; ``byte``, ``line`` and ``column`` locate ``text[pos]``
    in the file. The consumed prefix is dropped only when it outgrows the rest, so
    consuming a record costs its length, not the buffer's.
    """

    def __init__(self, path: Path, handle: IO[bytes]) -> None:
        self.path, self.handle = path, handle
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text, self.pos = "", 0
        self.byte, self.line, self.column = 0, 1, 1
        self.read_bytes = 0  # bytes handed to the decoder so far (BOM included)
        self.eof = False

    @property
    def rest(self) -> int:
        return len(self.text) - self.pos

    def startswith(self, prefix: str) -> bool:
        return self.text.startswith(prefix, self.pos)

    def more(self) -> bool:
        """Append one chunk; ``False`` at end of file."""
        if self.eof:
            return False
        chunk = self.handle.read(CHUNK)
        if self.read_bytes == 0 and chunk.startswith(codecs.BOM_UTF8):
            chunk, self.read_bytes, self.byte = chunk[3:], 3, 3
        pending = len(self.decoder.getstate()[0])
        try:
            decoded = self.decoder.decode(chunk, final=not chunk)
        except UnicodeDecodeError as exc:
            offset = self.read_bytes - pending + exc.start
            line = (
                self.line + self.text.count("\n", self.pos) + exc.object.count(b"\n", 0, exc.start)
            )
            raise line_error(
                self.path,
                line,
                "encoding",
                f"not valid UTF-8 (byte 0x{exc.object[exc.start]:02x} at byte offset "
                f"{offset} of the file)",
                _REENCODE,
            ) from None
        if self.pos > len(self.text) - self.pos:
            self.text, self.pos = self.text[self.pos :], 0
        self.text += decoded
        self.read_bytes += len(chunk)
        self.eof = not chunk
        return bool(chunk)

    def skip_space(self) -> None:
        while True:
            end = self.pos
            while end < len(self.text) and self.text[end] in _WHITESPACE:
                end += 1
            self.consume(end - self.pos)
            if self.rest or not self.more():
                return

    def consume(self, count: int) -> str:
        """Drop ``count`` characters from the front, advancing the positions."""
        taken = self.text[self.pos : self.pos + count]
        self.pos += count
        self.byte += len(taken.encode("utf-8"))
        newlines = taken.count("\n")
        if newlines:
            self.line += newlines
            self.column = count - taken.rfind("\n")
        else:
            self.column += count
        return taken

    def syntax_error(self, position: int, message: str) -> MultiHopDataError:
        """``position``: index into ``text`` (at or after ``pos``)."""
        newlines = self.text.count("\n", self.pos, position)
        if newlines:
            line, column = self.line + newlines, position - self.text.rfind("\n", 0, position)
        else:
            line, column = self.line, self.column + position - self.pos
        return MultiHopDataError(
            f"{self.path}:{line}:{column}: invalid JSON ({message}). "
            "Fix: the file must be one JSON list of HotpotQA records."
        )

    def value(self) -> tuple[Any, int]:
        """Decode one JSON value at the front; returns it and its length in characters."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as err:
                # more() may drop the consumed prefix: keep positions relative to pos.
                at = err.pos - self.pos
                # Near the end, or an unfinished string: more text may complete the value.
                near_end = err.pos >= len(self.text) - 32
                if (near_end or err.msg.startswith("Unterminated")) and self.more():
                    continue
                raise self.syntax_error(self.pos + at, err.msg) from None
            length = end - self.pos
            if end >= len(self.text) - 32 and self.more():
                continue  # a number cut by the chunk end: decode again with more text
            return value, length


def scan_hotpot(path: Path) -> Iterator[tuple[int, int, int, Any]]:
    """Stream ``(byte offset, byte length, line, record)`` of a HotpotQA JSON list or JSON
    Lines file. Raises :class:`MultiHopDataError` for invalid JSON (``file:line:column``)
    or UTF-8 (``file:line``) and for a root that is not a list."""
    if not path.is_file():
        raise line_error(path, None, "path", "file not found", "give the path of an existing file")
    with path.open("rb") as handle:
        stream = _Stream(path, handle)
        stream.skip_space()
        lines_format = stream.startswith("{")
        if not lines_format:
            if not stream.startswith("["):
                if not stream.rest:
                    raise stream.syntax_error(stream.pos, "Expecting value")
                raise field_error(
                    path, "line 1", "<root>", "not a JSON list", "wrap the records in [...]"
                )
            stream.consume(1)
        count = 0
        while True:
            stream.skip_space()
            if lines_format:
                if not stream.rest:
                    return
            elif stream.startswith("]"):
                if count == 0:
                    break
                stream.consume(1)
                stream.skip_space()
                if stream.rest:
                    raise stream.syntax_error(stream.pos, "Extra data")
                return
            elif count:
                if not stream.startswith(","):
                    raise stream.syntax_error(stream.pos, "Expecting ',' delimiter")
                stream.consume(1)
                stream.skip_space()
            if not stream.rest:
                raise stream.syntax_error(stream.pos, "Expecting value")
            start, line = stream.byte, stream.line
            value, end = stream.value()
            text = stream.consume(end)
            record_line = line
            if isinstance(value, dict) and isinstance(value.get("_id"), str):
                at = text.find(json.dumps(value["_id"], ensure_ascii=False))
                if at < 0:
                    at = text.find(json.dumps(value["_id"]))
                record_line = line + text.count("\n", 0, max(at, 0))
            yield start, stream.byte - start, record_line, value
            count += 1
    raise field_error(
        path,
        "line 1",
        "<root>",
        "the list holds no records",
        "give the HotpotQA records of this split (or the right file)",
    )


def _where(index: int, line: int, record: Any) -> str:
    if isinstance(record, dict) and isinstance(record.get("_id"), str):
        return f"line {line} (record {index}, _id {record['_id']!r})"
    return f"line {line} (record {index})"


class MultiHopFile(FileRecords):
    """The validated records of a HotpotQA-format file, parsed per index.

    Args:
        path: the file.
        spans: ``(N, 3)`` int64 rows ``(byte offset, byte length, line)``.
    """

    def __init__(self, path: Path, spans: np.ndarray) -> None:
        super().__init__(path)
        self.spans = spans

    def __len__(self) -> int:
        return len(self.spans)

    def _build(self, index: int) -> MultiHopExample:
        offset, length, line = (int(v) for v in self.spans[index])
        record = json.loads(self.read_at(offset, length).decode("utf-8"))
        return parse_record(self.path, _where(index, line, record), record)


def open_hotpot_json(path: str | Path) -> MultiHopFile:
    """Validate a HotpotQA-format file in one streaming pass; records are parsed on access.

    Args:
        path: a JSON list of HotpotQA records (train/dev "distractor" layout) or JSON Lines.

    Returns:
        A :class:`MultiHopFile` (a ``Sequence`` of :class:`MultiHopExample`).

    Raises:
        MultiHopDataError: a missing file, invalid UTF-8 (with line and byte offset),
            invalid JSON (with line/column), an empty list, a record with a missing or
            malformed field (with the record's line, index and ``_id``), or an ``_id``
            used twice (naming both records).
    """
    path = Path(path)
    spans = array("q")
    first_seen: dict[bytes, tuple[int, int]] = {}  # 8-byte id digest -> (index, line)
    for index, (offset, length, line, record) in enumerate(scan_hotpot(path)):
        where = _where(index, line, record)
        example = parse_record(path, where, record)
        key = hashlib.blake2b(example.id.encode("utf-8"), digest_size=8).digest()
        if key in first_seen:
            earlier, earlier_line = first_seen[key]
            raise field_error(
                path,
                where,
                "_id",
                f"duplicate _id {example.id!r}, first used at "
                f"line {earlier_line} (record {earlier}, _id {example.id!r})",
                "give every question a unique _id (drop the repeated record)",
            )
        first_seen[key] = (index, line)
        spans.extend((offset, length, line))
    table = np.frombuffer(spans, dtype=np.int64).reshape(-1, 3).copy()
    return MultiHopFile(path, table)
