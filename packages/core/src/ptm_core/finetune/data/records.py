"""Task files read lazily: one streaming pass validates, then examples are parsed per index.

Every line-based task reader (GLUE TSV/JSONL, CoNLL columns, SWAG CSV) streams its file once
with :func:`ptm_core.data.lines.decode_line` (lines split on ``"\\n"`` only, invalid UTF-8
reported with file, line and byte), keeps each example's byte offset and line number
(16 bytes an example) and returns a :class:`TaskRecords`: a sequence that seeks to the
example and parses it when indexed. A train file of millions of rows therefore costs a few
megabytes, and the sequence pickles into DataLoader workers (it reopens the file there).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from ptm_core.data.errors import DataError
from ptm_core.data.file_records import FileRecords
from ptm_core.data.layouts import LazyRows
from ptm_core.data.lines import decode_line
from ptm_core.finetune.data.tables import TableFile

#: ``(handle, byte offset, line number) -> example``: parses one record of a validated file.
RecordParser = Callable[[IO[bytes], int, int], Any]


class TaskRecords(FileRecords):
    """The examples of one validated task file, parsed when indexed.

    Args:
        path: the file.
        offsets: ``(N,)`` int64 byte offset where each example starts.
        lines: ``(N,)`` int64 its 1-based line number (for errors).
        parse: ``(handle, offset, line) -> example`` (a picklable callable, e.g. a
            :func:`functools.partial` of a module-level function).
        label_names: label (or tag) names, index order; empty for regression, QA and
            multiple choice.
    """

    def __init__(
        self,
        path: Path,
        offsets: np.ndarray,
        lines: np.ndarray,
        parse: RecordParser,
        label_names: Sequence[str] = (),
    ) -> None:
        super().__init__(path)
        self.offsets, self.lines, self._parse = offsets, lines, parse
        self.label_names = list(label_names)

    def __len__(self) -> int:
        return len(self.offsets)

    def _build(self, index: int) -> Any:
        return self._parse(self.handle(), int(self.offsets[index]), int(self.lines[index]))


class TableRecords(LazyRows):
    """The examples of one validated :class:`~ptm_core.finetune.data.tables.TableFile`,
    parsed when indexed (what the row-based task readers return, in any table format).

    Args:
        table: the file.
        keys: ``(N,)`` int64 where each example is (:meth:`TableFile.row`'s key).
        lines: ``(N,)`` int64 its line (or row) number, for errors.
        parse: ``(values, number) -> example`` (picklable).
        label_names: label names, index order; empty for regression and multiple choice.
    """

    def __init__(
        self,
        table: TableFile,
        keys: np.ndarray,
        lines: np.ndarray,
        parse: Callable[[dict[str, Any], int], Any],
        label_names: Sequence[str] = (),
    ) -> None:
        self.table, self.keys, self.lines, self._parse = table, keys, lines, parse
        self.label_names = list(label_names)

    @property
    def path(self) -> Path:
        """The file (or ``datasets`` folder)."""
        return self.table.path

    def __len__(self) -> int:
        return len(self.keys)

    def _build(self, index: int) -> Any:
        number = int(self.lines[index])
        return self._parse(self.table.row(int(self.keys[index]), number), number)

    def __repr__(self) -> str:
        return f"TableRecords({str(self.path)!r}, {len(self)} examples)"


class ExampleList(Sequence[Any]):
    """Examples held in memory (SQuAD's one JSON document), with the same attributes as
    :class:`TaskRecords`.

    Args:
        path: the file they were read from.
        examples: the examples.
        label_names: label names (empty for QA).
    """

    def __init__(self, path: Path, examples: list[Any], label_names: Sequence[str] = ()) -> None:
        self.path = path
        self.examples = examples
        self.label_names = list(label_names)

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: Any) -> Any:
        return self.examples[index]

    def __repr__(self) -> str:
        return f"ExampleList({str(self.path)!r}, {len(self)} examples)"


def lines_at(path: Path) -> Iterator[tuple[int, int, str]]:
    """``(byte offset, line number, text)`` of every line of a UTF-8 file, streamed.

    Raises:
        DataError: field ``path`` for a missing file, ``encoding`` for invalid UTF-8 (with
            the line and the byte in it).
    """
    if not path.is_file():
        raise DataError(path, None, "path", "file not found", "give the path of an existing file")
    with path.open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, start=1):
            yield offset, number, decode_line(raw, path, number)
            offset += len(raw)


def read_line(handle: IO[bytes], offset: int, path: Path, number: int) -> str:
    """The decoded line at ``offset`` (lazy access after validation)."""
    handle.seek(offset)
    return decode_line(handle.readline(), path, number)


def no_examples(path: Path, what: str) -> DataError:
    """The error for a file that holds no example."""
    return DataError(
        path, None, "examples", f"no {what} in the file", f"add {what}, or give the right file"
    )


def unknown_label(
    path: Path, line: int | None, field: str, value: str, names: Sequence[str]
) -> DataError:
    """The error for a label (or tag) that the train set does not have."""
    shown = list(names) if len(names) <= 20 else [*names[:20], "..."]
    return DataError(
        path,
        line,
        field,
        f"label {value!r} is not one of the {len(names)} train labels {shown}",
        "fix the label, or add examples of it to the train file (label names come from "
        "the train set)",
    )


def to_int64(values: array) -> np.ndarray:
    """An ``array('q')`` as an int64 numpy array (a copy; empty arrays too)."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    return np.frombuffer(values, dtype=np.int64).copy()


__all__ = [
    "ExampleList",
    "RecordParser",
    "TableRecords",
    "TaskRecords",
    "lines_at",
    "no_examples",
    "read_line",
    "to_int64",
    "unknown_label",
]
