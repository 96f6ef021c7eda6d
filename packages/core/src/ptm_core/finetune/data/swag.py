"""SWAG-style multiple choice (Zellers et al., 2018, "SWAG"), in any tabular format.

A header row, then one example per row: ``sent1`` (the context), ``sent2`` (the start of
the next sentence), ``ending0`` ... ``ending{C-1}`` and ``label`` (the correct ending's
index); other columns (``video-id``, ``fold-ind``, ``startphrase``, ``gold-source``) are
ignored. The columns of the official ``train.csv``/``val.csv`` and of Hugging Face
``run_swag``. The file is CSV as SWAG's (a ``.tsv``, ``.jsonl``, ``.json``, ``.parquet`` or
``datasets`` folder with the same columns works too: :mod:`ptm_core.finetune.data.tables`).
See ``data_specs/multiple_choice/``.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ptm_core.data.text_cells import check_text
from ptm_core.finetune.data.examples import ChoiceExample
from ptm_core.finetune.data.records import TableRecords, no_examples, to_int64
from ptm_core.finetune.data.tables import TableFile, table_format

_ENDING = re.compile(r"ending(\d+)")
ID_FIELDS = ("id", "fold-ind")


@dataclass(frozen=True)
class SwagLayout:
    """The ending columns of a SWAG-style table, its label and id columns."""

    table: TableFile
    endings: tuple[str, ...]
    label: str | None
    id: str | None


def read_swag(path: str | Path, *, require_labels: bool = True) -> TableRecords:
    """Read a SWAG-style file, lazily (one streaming pass validates it).

    A ``.csv`` (or any suffix that is not another table format) is comma-separated with
    ``"`` quoting (Python's ``csv`` dialect ``excel``, as SWAG's files).

    Args:
        path: the file (UTF-8), or a ``datasets`` folder.
        require_labels: when False, a file without a ``label`` column (SWAG's test file)
            gives examples with ``label=None``.

    Returns:
        A lazy sequence of :class:`ChoiceExample` (``label_names`` is empty: a label is
        the index of an ending).

    Raises:
        DataError: ``file:line`` and the column: a missing column, a row with the wrong
            number of fields, a label that is not an ending's index, invalid UTF-8, or a
            file without examples.
    """
    path = Path(path)
    table = swag_table(path)
    layout = swag_layout(table, require_labels)
    keys, lines = array("q"), array("q")
    for key, number, values in table.scan():
        swag_example(layout, values, number)
        keys.append(key)
        lines.append(number)
    if not keys:
        raise no_examples(path, "examples (a header row, then one example per line)")
    return TableRecords(table, to_int64(keys), to_int64(lines), partial(swag_example, layout))


def swag_table(path: str | Path) -> TableFile:
    """A SWAG-style file as a table: CSV unless its suffix names another table format."""
    path = Path(path)
    fmt = table_format(path) if path.exists() else "csv"
    return TableFile(path, "csv" if fmt == "tsv" and path.suffix.lower() != ".tsv" else fmt)


def swag_layout(table: TableFile, require_labels: bool) -> SwagLayout:
    """The columns of a SWAG-style table, checked."""
    names = list(table.columns)
    number = table.header_line if table.by_line else None
    where = table.where_columns
    fix = "name the columns sent1,sent2,ending0,ending1,...,label (see data_specs/multiple_choice)"
    for name in ("sent1", "sent2", "ending0", "ending1"):
        if name not in names:
            raise table.error(number, name, f"the {where} has no column {name!r}", fix)
    count = 0
    while f"ending{count}" in names:
        count += 1
    extra = [n for n in names if _ENDING.fullmatch(n) and int(n[6:]) >= count]
    if extra:
        raise table.error(
            number,
            extra[0],
            f"ending columns skip ending{count}",
            "number the endings ending0, ending1, ... without gaps",
        )
    if "label" not in names and require_labels:
        raise table.error(
            number,
            "label",
            f"the {where} has no column 'label'",
            "add the label column (the correct ending's index); a file to predict on needs none",
        )
    return SwagLayout(
        table=table,
        endings=tuple(f"ending{i}" for i in range(count)),
        label="label" if "label" in names else None,
        id=next((n for n in ID_FIELDS if n in names), None),
    )


def swag_example(layout: SwagLayout, values: dict[str, Any], number: int) -> ChoiceExample:
    """The :class:`ChoiceExample` of a row, validated."""
    table = layout.table
    label: int | None = None
    if layout.label is not None:
        raw = str(values.get(layout.label, "")).strip()
        if not raw.isdigit() or int(raw) >= len(layout.endings):
            raise table.error(
                number,
                "label",
                f"label {raw!r} is not the index of one of the {len(layout.endings)} endings",
                f"write 0..{len(layout.endings) - 1}",
            )
        label = int(raw)
    cells = {}
    for name in ("sent1", "sent2", *layout.endings):
        value = values.get(name)
        if not isinstance(value, str):
            raise table.error(
                number,
                name,
                f"expected a string, got {type(value).__name__}",
                "write the text as a string",
            )
        cells[name] = check_text(*table.at(number), name, value)
    ident = values.get(layout.id) if layout.id is not None else None
    return ChoiceExample(
        context=cells["sent1"],
        start=cells["sent2"],
        endings=[cells[name] for name in layout.endings],
        label=label,
        id=str(ident) if ident is not None else str(number),
        line=number,
    )


__all__ = ["SwagLayout", "read_swag", "swag_example", "swag_layout", "swag_table"]
