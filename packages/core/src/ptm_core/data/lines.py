"""Line-by-line reading of UTF-8 data files, shared by every data-spec reader.

Lines are split on ``"\\n"`` only (a trailing ``"\\r"`` is dropped). ``str.splitlines()`` is
not used on purpose: it also splits on U+2028, U+2029, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``
and ``\\x85``, which are ordinary characters inside a JSON string or a TSV cell, so it
breaks JSONL round trips and shifts the line numbers of every later error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from ptm_core.data.errors import DataError

#: Builds the exception a reader raises: ``(path, line, field, problem, fix)``, the
#: signature of :class:`DataError` and its subclasses.
ErrorFactory = Callable[[Path, int | None, str, str, str], Exception]

_BOM = b"\xef\xbb\xbf"
_REENCODE = "re-encode the file as UTF-8 (e.g. iconv -f <its encoding> -t UTF-8)"


def iter_lines(
    path: str | os.PathLike[str], error: ErrorFactory = DataError
) -> Iterator[tuple[int, str]]:
    """Stream ``(line number, text)`` of a UTF-8 file, splitting on ``"\\n"`` only.

    The file is read in binary and decoded one line at a time (a UTF-8 multi-byte sequence
    never holds the byte ``0x0A``), so memory stays flat and an invalid byte is reported
    with its line. A UTF-8 byte-order mark at the start of the file is dropped, as is one
    ``"\\r"`` before each ``"\\n"``. A final line without ``"\\n"`` is yielded; an empty
    last line after the final ``"\\n"`` is not (as ``str.splitlines``).

    Args:
        path: The file.
        error: Builds the exception to raise, called as
            ``error(path, line, field, problem, fix)``; a :class:`DataError` subclass
            (``CorpusError``, ``KGError``, ...) fits as is.

    Yields:
        ``(1-based line number, line text without its line ending)``.

    Raises:
        Exception: Built by ``error``: field ``path`` when the file does not exist, field
            ``encoding`` (with the line) for bytes that are not UTF-8.
    """
    path = Path(path)
    _check_regular_file(path, error)
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            yield number, decode_line(raw, path, number, error)


def _check_regular_file(path: Path, error: ErrorFactory) -> None:
    if path.is_file():
        return
    if path.exists():
        # A FIFO would block the read until a writer comes; a folder cannot be read.
        kind = "a folder" if path.is_dir() else "not a regular file (a pipe, socket or device)"
        raise error(path, None, "path", kind, "give the path of a regular file")
    raise error(path, None, "path", "file not found", "give the path of an existing file")


def decode_line(raw: bytes, path: Path, number: int, error: ErrorFactory = DataError) -> str:
    """One line's text: a BOM dropped from line 1, its ``\n`` or ``\r\n`` removed, UTF-8
    decoded, or ``error`` naming ``path:number`` and the first invalid byte."""
    if number == 1:
        raw = raw.removeprefix(_BOM)
    raw = raw.removesuffix(b"\n").removesuffix(b"\r")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            path,
            number,
            "encoding",
            f"not valid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line)",
            _REENCODE,
        ) from None


def read_utf8(path: str | os.PathLike[str], error: ErrorFactory = DataError) -> str:
    """Read a whole UTF-8 file (for formats parsed as one document, such as a JSON list).

    A byte-order mark is dropped; invalid bytes are reported with the line they are on.

    Args:
        path: The file.
        error: As for :func:`iter_lines`.

    Returns:
        The decoded text.

    Raises:
        Exception: Built by ``error``: field ``path`` for a missing file, field
            ``encoding`` with the line and byte offset of the first invalid byte.
    """
    path = Path(path)
    _check_regular_file(path, error)
    data = path.read_bytes()
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = skip + exc.start  # in the file, not in the BOM-less copy
        raise error(
            path,
            data.count(b"\n", 0, offset) + 1,
            "encoding",
            f"not valid UTF-8 (byte 0x{data[offset]:02x} at byte offset {offset} of the file)",
            _REENCODE,
        ) from None


__all__ = ["ErrorFactory", "iter_lines", "read_utf8"]
