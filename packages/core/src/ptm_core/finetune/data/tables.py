"""Tabular task files in the formats users have: TSV, CSV, JSONL, JSON, Parquet, ``datasets``.

One reader layer under every row-based task format (GLUE-style classification and
regression, SWAG-style multiple choice, and the rows ``ptm predict`` reads): a
:class:`TableFile` names its columns, streams its rows once as ``{column: value}`` dicts
(:meth:`TableFile.scan`, what validation and prediction use), and reads one row again by
the key the scan gave (:meth:`TableFile.row`, what training batches use).

- ``tsv`` (any suffix not below): a header row, fields split on tabs, no quoting (GLUE).
- ``csv``: a header row, Python ``csv``'s ``excel`` dialect (quoted fields may hold commas,
  quotes and line breaks).
- ``jsonl`` (``.jsonl``, ``.ndjson``, and a ``.json`` whose first character is ``{``): one
  JSON object per line (Hugging Face ``run_glue``'s ``.json`` files are this).
- ``json``: a ``.json`` file holding one array of objects (read whole).
- ``parquet``: read by ``pyarrow`` in record batches.
- ``datasets``: a folder written by ``datasets.Dataset.save_to_disk`` (its Arrow files are
  memory-mapped).

Line-based files (TSV, CSV, JSONL) are located by byte offset and reported by line;
the others by row (``file row 7``). Errors are :class:`~ptm_core.data.errors.DataError`.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ptm_core.data.errors import DataError
from ptm_core.data.lines import decode_line
from ptm_core.data.text_cells import loads_json

TABLE_FORMATS = ("tsv", "csv", "jsonl", "json", "parquet", "datasets")
_SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_ARROW_FORMATS = ("json", "parquet", "datasets")
_BATCH_ROWS = 4096


def table_format(path: str | Path) -> str:
    """The format of a task file or folder, from its suffix (a ``.json`` from its first
    character: ``[`` is one array, else JSON Lines)."""
    path = Path(path)
    if path.is_dir():
        return "datasets"
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json" if _first_char(path) == "[" else "jsonl"
    return _SUFFIXES.get(suffix, "tsv")


def _first_char(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except FileNotFoundError:
        return ""
    return head[:1].decode("ascii", "replace")


class TableFile:
    """One tabular task file (or ``datasets`` folder), read in any of :data:`TABLE_FORMATS`.

    Picklable: a DataLoader worker reopens the file (or maps the Arrow table) on first use.

    Args:
        path: the file, or a ``save_to_disk`` folder.
        format: one of :data:`TABLE_FORMATS`; default from :func:`table_format`.
    """

    def __init__(self, path: str | Path, format: str | None = None) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise DataError(
                self.path, None, "path", "file not found", "give the path of an existing file"
            )
        self.format = format or table_format(self.path)
        if self.format not in TABLE_FORMATS:
            raise ValueError(f"unknown table format {self.format!r}; valid: {TABLE_FORMATS}")
        self.by_line = self.format not in _ARROW_FORMATS
        self._handle: IO[bytes] | None = None
        self._table: Any = None
        self._pid = -1
        self.columns: tuple[str, ...] = ()
        self.header_line = 1
        self._open_columns()

    # -- where things are -------------------------------------------------------------

    def error(self, number: int | None, field: str, problem: str, fix: str) -> DataError:
        """A :class:`DataError` at ``number`` (a line, or a 1-based row of an Arrow file)."""
        return DataError(*self.at(number), field, problem, fix)

    def at(self, number: int | None) -> tuple[str | Path, int | None]:
        """``(path, line)`` for a :class:`DataError` about ``number`` (see :meth:`error`)."""
        if self.by_line or number is None:
            return self.path, number
        return f"{self.path} row {number}", None

    @property
    def where_columns(self) -> str:
        """How the column names are found, for messages: ``header row``, ``first object``."""
        return {"jsonl": "first object", "json": "first object"}.get(
            self.format, "header row" if self.by_line else "schema"
        )

    # -- reading ----------------------------------------------------------------------

    def scan(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """Every data row once, streamed: ``(key, line or row number, values)``; ``key`` is
        what :meth:`row` takes (a byte offset, or a row index)."""
        if self.format == "tsv":
            for offset, number, line in self._lines():
                if number > self.header_line and line.strip():
                    yield offset, number, self._tsv_values(number, line)
        elif self.format == "jsonl":
            for offset, number, line in self._lines():
                if line.strip():
                    yield offset, number, self._json_values(number, line)
        elif self.format == "csv":
            yield from self._csv_rows()
        else:
            index = 0
            for batch in self._arrow_batches():
                for values in batch.to_pylist():
                    index += 1
                    yield index - 1, index, values

    def row(self, key: int, number: int) -> dict[str, Any]:
        """The values of the row that :meth:`scan` gave as ``(key, number, ...)``."""
        if self.format in _ARROW_FORMATS:
            if self.format == "json":
                return dict(self._arrow()[key])
            return dict(self._arrow().slice(key, 1).to_pylist()[0])
        handle = self._binary()
        handle.seek(key)
        if self.format == "csv":
            reader = csv.reader(_decoded(handle, self.path, number), strict=True)
            return self._csv_values(number, self._csv_next(reader, number))
        line = decode_line(handle.readline(), self.path, number)
        if self.format == "tsv":
            return self._tsv_values(number, line)
        return self._json_values(number, line)

    # -- formats ----------------------------------------------------------------------

    def _open_columns(self) -> None:
        if self.format in _ARROW_FORMATS:
            self.columns = tuple(self._arrow_schema_names())
            return
        if self.format == "csv":
            with self.path.open("rb") as handle:
                lines = _decoded(handle, self.path, 1)
                reader = csv.reader(lines, strict=True)
                header = self._csv_next(reader, 1, header=True)
            self.columns = tuple(name.strip() for name in header)
            self.header_line = reader.line_num
            return
        for _offset, number, line in self._lines():
            if not line.strip():
                continue
            if self.format == "tsv":
                self.columns = tuple(name.strip() for name in line.rstrip("\r\n").split("\t"))
            else:
                self.columns = tuple(self._json_values(number, line))
            self.header_line = number
            return
        raise self.error(None, "examples", "the file is empty", "add a header row and examples")

    def _lines(self) -> Iterator[tuple[int, int, str]]:
        with self.path.open("rb") as handle:
            offset = 0
            for number, raw in enumerate(handle, start=1):
                yield offset, number, decode_line(raw, self.path, number)
                offset += len(raw)

    def _tsv_values(self, number: int, line: str) -> dict[str, Any]:
        cells = line.rstrip("\r\n").split("\t")
        if len(cells) != len(self.columns):
            raise self.error(
                number,
                "columns",
                f"{len(cells)} tab-separated columns, but the header has {len(self.columns)} "
                f"({list(self.columns)})",
                "separate the columns with one tab each; a tab inside a sentence must be "
                "replaced by a space (or write the file as CSV, .csv, which quotes)",
            )
        return dict(zip(self.columns, cells, strict=True))

    def _json_values(self, number: int, line: str) -> dict[str, Any]:
        value = loads_json(self.path, number, line, "write one JSON object per line")
        if not isinstance(value, dict):
            raise self.error(
                number,
                "json",
                f"expected a JSON object, got {type(value).__name__}",
                'write one object per line, e.g. {"sentence": "...", "label": "..."}',
            )
        return value

    def _csv_next(self, reader: Any, number: int, header: bool = False) -> list[str]:
        try:
            return list(next(reader))
        except StopIteration:
            raise self.error(
                None, "examples", "the file is empty", "add a header row and examples"
            ) from None
        except csv.Error as exc:
            raise self.error(
                number,
                "csv",
                f"not a CSV {'header ' if header else ''}row ({exc})",
                'quote fields that hold commas, quotes or line breaks ("a, b"; a quote is "")',
            ) from None

    def _csv_values(self, number: int, cells: list[str]) -> dict[str, Any]:
        if len(cells) != len(self.columns):
            raise self.error(
                number,
                "columns",
                f"{len(cells)} fields, but the header has {len(self.columns)} "
                f"({list(self.columns)})",
                'give every row the header\'s columns; quote a field holding a comma ("a, b")',
            )
        return dict(zip(self.columns, cells, strict=True))

    def _csv_rows(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        with self.path.open("rb") as handle:
            lines = _OffsetLines(handle, self.path)
            reader = csv.reader(lines, strict=True)
            self._csv_next(reader, 1, header=True)
            while True:
                start, number = lines.next_offset, lines.number + 1
                try:
                    cells = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    raise self.error(
                        number,
                        "csv",
                        f"not a CSV row ({exc})",
                        'quote fields that hold commas, quotes or line breaks ("a, b"; a '
                        'quote is written "")',
                    ) from None
                if not cells or (len(cells) == 1 and not cells[0].strip()):
                    continue  # a blank line
                yield start, number, self._csv_values(number, cells)

    def _arrow_schema_names(self) -> list[str]:
        if self.format == "parquet":
            import pyarrow.parquet as pq

            return list(pq.ParquetFile(self.path).schema_arrow.names)
        if self.format == "json":
            return list(dict.fromkeys(key for row in self._arrow() for key in row))
        return list(self._arrow().column_names)

    def _arrow_batches(self) -> Iterator[Any]:
        if self.format == "parquet":
            import pyarrow.parquet as pq

            yield from pq.ParquetFile(self.path).iter_batches(batch_size=_BATCH_ROWS)
        elif self.format == "json":
            rows = self._arrow()
            for start in range(0, len(rows), _BATCH_ROWS):
                yield _Rows(rows[start : start + _BATCH_ROWS])
        else:
            yield from self._arrow().to_batches(max_chunksize=_BATCH_ROWS)

    def _arrow(self) -> Any:
        if self._table is None or self._pid != os.getpid():
            self._table, self._pid = self._load_arrow(), os.getpid()
        return self._table

    def _load_arrow(self) -> Any:
        if self.format == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(self.path)
        if self.format == "json":
            return _json_array(self)
        if (self.path / "dataset_dict.json").exists():
            splits = sorted(p.name for p in self.path.iterdir() if p.is_dir())
            raise self.error(
                None,
                "path",
                f"a DatasetDict folder (splits {splits}), not one split",
                f"give the split's folder, e.g. {self.path / (splits[0] if splits else 'train')}",
            )
        try:
            from datasets import load_from_disk
        except ImportError as exc:  # pragma: no cover - datasets is a dependency of ptm
            raise ImportError(
                f"{self.path}: reading a `datasets` folder needs the `datasets` package; "
                "pip install datasets"
            ) from exc
        try:
            dataset = load_from_disk(str(self.path))
        except FileNotFoundError as exc:
            raise self.error(
                None,
                "path",
                f"not a file, nor a folder written by datasets' save_to_disk ({exc})",
                "give a task file (.tsv, .csv, .jsonl, .json, .parquet) or a save_to_disk folder",
            ) from None
        # save_to_disk wrote the rows in order (it flattens a selection), memory-mapped here
        return dataset.data.table

    def _binary(self) -> IO[bytes]:
        if self._handle is None or self._pid != os.getpid():
            self._handle, self._pid = self.path.open("rb"), os.getpid()
        return self._handle

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handle": None, "_table": None, "_pid": -1}

    def __repr__(self) -> str:
        return f"TableFile({str(self.path)!r}, format={self.format!r})"


def _json_array(table: TableFile) -> list[dict[str, Any]]:
    """A ``.json`` array of objects, as Python values (read whole: JSON has no chunks)."""
    with table.path.open("rb") as handle:
        try:
            value = json.load(io.TextIOWrapper(handle, encoding="utf-8-sig"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise table.error(
                None, "json", f"not a JSON document ({exc})", "write one array of objects"
            ) from None
    if not isinstance(value, list):
        raise table.error(
            None, "json", f"expected an array, got {type(value).__name__}", "write [{...}, ...]"
        )
    bad = next((i for i, v in enumerate(value) if not isinstance(v, dict)), None)
    if bad is not None:
        raise table.error(
            bad + 1,
            "json",
            f"expected a JSON object, got {type(value[bad]).__name__}",
            'write an array of objects, e.g. [{"sentence": "...", "label": "..."}]',
        )
    return value


class _Rows:
    """A chunk of a JSON array with Arrow's record-batch ``to_pylist``."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.rows


class _OffsetLines:
    """Decoded lines of a binary file for ``csv.reader``, remembering where the next starts."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self.handle, self.path = handle, path
        self.next_offset, self.number = 0, 0

    def __iter__(self) -> _OffsetLines:
        return self

    def __next__(self) -> str:
        raw = self.handle.readline()
        if not raw:
            raise StopIteration
        self.number += 1
        self.next_offset += len(raw)
        return decode_line(raw, self.path, self.number) + "\n"  # csv needs the line break


def _decoded(handle: IO[bytes], path: Path, first: int) -> Iterator[str]:
    for number, raw in enumerate(iter(handle.readline, b""), start=first):
        yield decode_line(raw, path, number) + "\n"


__all__ = ["TABLE_FORMATS", "TableFile", "table_format"]
