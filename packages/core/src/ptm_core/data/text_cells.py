"""Checks of one text value of a data file (a TSV cell, a JSON string), shared by the readers.

A text value reaches a tokenizer. A NUL or other C0 control byte there is almost always a
binary or UTF-16 file read as text; a lone UTF-16 surrogate (``"\\ud800"`` in JSON) cannot
be encoded at all and made the fast tokenizer raise a ``TypeError``; JSON nested thousands
deep raised a ``RecursionError``. Each becomes one :class:`DataError` naming the file, the
line (or the JSON path) and the field.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ptm_core.data.errors import DataError
from ptm_core.data.lines import ErrorFactory

# C0 controls but tab and the line breaks (a JSON string may hold "\n"), DEL, C1 controls.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def check_text(
    path: str | Path,
    line: int | None,
    field: str,
    text: str,
    error: ErrorFactory = DataError,
) -> str:
    """Fail on a control character or a lone surrogate in ``text``; else return it.

    Args:
        path: The file, for the message.
        line: The line the text is on (``None`` for a whole-file JSON document).
        field: The column, key or JSON path holding it.
        text: The value.
        error: Builds the exception, as in :func:`ptm_core.data.lines.iter_lines`.

    Returns:
        ``text``, unchanged.

    Raises:
        Exception: Built by ``error``, naming the character and its position.
    """
    match = _CONTROL.search(text)
    if match:
        raise error(
            Path(path),
            line,
            field,
            f"control character U+{ord(match.group()):04X} at character {match.start() + 1}",
            "remove it (a NUL often means a binary or UTF-16 file: re-encode it as UTF-8)",
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(
            Path(path),
            line,
            field,
            f"unpaired surrogate U+{ord(text[exc.start]):04X} at character {exc.start + 1}",
            "write the character itself, or both halves of a \\ud83d\\ude00-style escape pair",
        ) from None
    return text


def loads_json(
    path: str | Path, line: int | None, text: str, fix: str, error: ErrorFactory = DataError
) -> Any:
    """``json.loads(text)``, with invalid or too deeply nested JSON as one error.

    Args:
        path: The file, for the message.
        line: The line ``text`` is (``None``: ``text`` is the whole file; the error then
            names the line JSON reports).
        text: The JSON text.
        fix: How to fix a bad line (the format's example).
        error: Builds the exception.

    Returns:
        The decoded value.

    Raises:
        Exception: Built by ``error``, field ``json``.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            Path(path),
            line if line is not None else exc.lineno,
            "json",
            f"invalid JSON ({exc.msg} at column {exc.colno})",
            fix,
        ) from None
    except RecursionError:
        raise error(Path(path), line, "json", "JSON nested too deeply to read", fix) from None


__all__ = ["check_text", "loads_json"]
