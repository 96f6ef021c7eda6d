"""Arrow and Parquet inputs of ``ptm prepare``: plan pieces by batches or row groups, stream rows.

Each row of the text column is one document, split into sentences by ``split_sentences``;
blank rows are skipped (Hugging Face dumps hold many); a null or non-string value, or a
control character, fails with the row number (1-based) in the ``:<line>`` place. pyarrow is
imported when first needed (``ptm-core[arrow]``); files are memory-mapped, so skipping to a
piece's first batch reads no data.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptm_core.data.corpus import CorpusError, check_document_text, split_sentences

_ROWS = 1024  # rows converted to Python strings at a time


def _arrow(path: object) -> Any:
    try:
        import pyarrow
        import pyarrow.ipc
        import pyarrow.parquet
    except ImportError:
        raise CorpusError(
            path,
            None,
            "path",
            "reading Arrow/Parquet needs the pyarrow package, which is not installed",
            "install it: pip install 'ptm-core[arrow]'",
        ) from None
    return pyarrow


def _text_column(path: Path, schema: Any, text_field: str) -> int:
    pa = _arrow(path)
    index = schema.get_field_index(text_field)
    if index < 0:
        raise CorpusError(
            path,
            None,
            text_field,
            f"no column {text_field!r} (columns: {', '.join(schema.names)})",
            "pass the text column with --text-field NAME (text_field=...)",
        )
    kind = schema.field(index).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise CorpusError(
            path,
            None,
            text_field,
            f"column {text_field!r} holds {kind}, not strings",
            "pass a column of document texts with --text-field NAME",
        )
    return int(index)


def _arrow_batches(path: Path) -> tuple[Iterator[Any], Any]:
    """Record batches and schema of an Arrow IPC stream (``save_to_disk``) or IPC file.

    The file is memory-mapped: a batch's data is read only when its values are used.
    """
    pa = _arrow(path)
    source = pa.memory_map(str(path))
    try:
        stream = pa.ipc.open_stream(source)
        return iter(stream), stream.schema
    except pa.ArrowInvalid:
        source.seek(0)
    try:
        reader = pa.ipc.open_file(source)
    except pa.ArrowInvalid as exc:
        raise CorpusError(
            path, None, "path", f"not an Arrow IPC file or stream ({exc})", "check the file"
        ) from None
    return (reader.get_batch(i) for i in range(reader.num_record_batches)), reader.schema


def _group(sizes: list[tuple[int, int]], shard_bytes: int) -> list[tuple[int, int, int]]:
    """``(start, stop, rows before)`` of consecutive units of ``(bytes, rows)`` per shard."""
    groups = []
    start = rows_before = used = rows = 0
    for index, (size, count) in enumerate(sizes):
        used += size
        rows += count
        if used >= shard_bytes:
            groups.append((start, index + 1, rows_before))
            start, rows_before, used = index + 1, rows_before + rows, 0
            rows = 0
    if start < len(sizes):
        groups.append((start, len(sizes), rows_before))
    return groups


def plan_table(
    path: Path, kind: str, shard_bytes: int, text_field: str
) -> list[tuple[int, int, int]]:
    """Cut an Arrow file (by record batches) or a Parquet file (by row groups) into pieces.

    Args:
        path: The file.
        kind: ``"arrow"`` or ``"parquet"``.
        shard_bytes: Target bytes of column ``text_field`` per piece.
        text_field: The text column (must exist and hold strings).

    Returns:
        ``(first unit, one past the last, rows before the first)`` per piece.

    Raises:
        CorpusError: Not an Arrow/Parquet file, or no such string column.
    """
    if kind == "arrow":
        batches, schema = _arrow_batches(path)
        column = _text_column(path, schema, text_field)
        return _group([(b.column(column).nbytes, b.num_rows) for b in batches], shard_bytes)
    parquet = _parquet(path)
    column = _text_column(path, parquet.schema_arrow, text_field)
    meta = parquet.metadata
    leaf = parquet.schema_arrow.names[column]
    leaf_index = [meta.schema.column(i).path for i in range(meta.num_columns)].index(leaf)
    sizes = [
        (meta.row_group(g).column(leaf_index).total_uncompressed_size, meta.row_group(g).num_rows)
        for g in range(meta.num_row_groups)
    ]
    return _group(sizes, shard_bytes)


def _parquet(path: Path) -> Any:
    pa = _arrow(path)
    try:
        return pa.parquet.ParquetFile(str(path))
    except pa.ArrowException as exc:
        raise CorpusError(
            path, None, "path", f"not a Parquet file ({exc})", "check the file"
        ) from None


def table_documents(
    path: Path, kind: str, start: int, stop: int, rows_before: int, text_field: str
) -> Iterator[list[str]]:
    """Stream the documents (rows) of a piece of an Arrow or Parquet file, validated.

    Args:
        path: The file.
        kind: ``"arrow"`` or ``"parquet"``.
        start: First record batch (Arrow) or row group (Parquet).
        stop: One past the last.
        rows_before: Rows of the file before ``start`` (for the row numbers of errors).
        text_field: The text column.

    Yields:
        Each non-blank row's sentences (``split_sentences``).

    Raises:
        CorpusError: A null or non-string value, or a control character, naming the row.
    """
    row = rows_before
    for values in _table_slices(path, kind, start, stop, text_field):
        for value in values:
            row += 1
            if isinstance(value, str) and not value.strip():
                continue  # blank rows are common in Hugging Face text dumps
            text = check_document_text(path, row, text_field, value)
            yield split_sentences(text)


def _table_slices(
    path: Path, kind: str, start: int, stop: int, text_field: str
) -> Iterator[list[Any]]:
    """Python values of the text column, ``_ROWS`` at a time (the rest stays mapped)."""
    if kind == "parquet":
        parquet = _parquet(path)
        name = parquet.schema_arrow.names[_text_column(path, parquet.schema_arrow, text_field)]
        groups = list(range(start, stop))
        for batch in parquet.iter_batches(batch_size=_ROWS, row_groups=groups, columns=[name]):
            yield batch.column(0).to_pylist()
        return
    batches, schema = _arrow_batches(path)
    column = _text_column(path, schema, text_field)
    for index, batch in enumerate(batches):
        if index >= stop:
            break
        if index < start:
            continue  # a stream has no index: skipping a mapped batch reads no data
        values = batch.column(column)
        for offset in range(0, len(values), _ROWS):
            yield values.slice(offset, _ROWS).to_pylist()
