"""SWAG-style CSV for multiple choice (Zellers et al., 2018, "SWAG").

A header row, then one example per line: ``sent1`` (the context), ``sent2`` (the start of
the next sentence), ``ending0`` ... ``ending{C-1}`` and ``label`` (the correct ending's
index); other columns (``video-id``, ``fold-ind``, ``startphrase``, ``gold-source``) are
ignored. The columns of the official ``train.csv``/``val.csv`` and of Hugging Face
``run_swag``. See ``data_specs/multiple_choice/``.
"""

from __future__ import annotations

import csv
import re
from array import array
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

from ptm_core.data.errors import DataError
from ptm_core.data.text_cells import check_text
from ptm_core.finetune.data.examples import ChoiceExample
from ptm_core.finetune.data.records import TaskRecords, lines_at, no_examples, read_line, to_int64

_ENDING = re.compile(r"ending(\d+)")
ID_FIELDS = ("id", "fold-ind")


@dataclass(frozen=True)
class _Layout:
    path: Path
    columns: dict[str, int]
    endings: tuple[int, ...]  # column of ending0, ending1, ...
    label: int | None
    id: int | None


def read_swag(path: str | Path, *, require_labels: bool = True) -> TaskRecords:
    """Read a SWAG-style CSV file, lazily (one streaming pass validates it).

    Fields are comma-separated with ``"`` quoting (Python's ``csv`` dialect ``excel``, as
    SWAG's files); an example is one line, so a quoted field must not hold a line break.

    Args:
        path: the CSV file (UTF-8).
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
    layout: _Layout | None = None
    offsets, lines = array("q"), array("q")
    for offset, number, line in lines_at(path):
        if not line.strip():
            continue
        if layout is None:
            layout = _layout(path, number, line, require_labels)
            continue
        _fields(layout, number, line)
        offsets.append(offset)
        lines.append(number)
    if not offsets or layout is None:
        raise no_examples(path, "examples (a header row, then one example per line)")
    return TaskRecords(path, to_int64(offsets), to_int64(lines), partial(_parse, layout))


def _cells(path: Path, number: int, line: str) -> list[str]:
    try:
        (cells,) = list(csv.reader([line], strict=True))
    except (csv.Error, ValueError) as exc:
        raise DataError(
            path,
            number,
            "csv",
            f"not a CSV row ({exc})",
            'quote fields that hold commas or quotes ("a, b"; a quote is written "")',
        ) from None
    for column, cell in enumerate(cells, start=1):
        check_text(path, number, f"column {column}", cell)
    return cells


def _layout(path: Path, number: int, line: str, require_labels: bool) -> _Layout:
    names = [name.strip() for name in _cells(path, number, line)]
    columns = {name: i for i, name in enumerate(names)}
    fix = "name the columns sent1,sent2,ending0,ending1,...,label (see data_specs/multiple_choice)"
    for name in ("sent1", "sent2", "ending0", "ending1"):
        if name not in columns:
            raise DataError(path, number, name, f"the header row has no column {name!r}", fix)
    count = 0
    while f"ending{count}" in columns:
        count += 1
    extra = [n for n in names if _ENDING.fullmatch(n) and int(n[6:]) >= count]
    if extra:
        raise DataError(
            path,
            number,
            extra[0],
            f"ending columns skip ending{count}",
            "number the endings ending0, ending1, ... without gaps",
        )
    if "label" not in columns and require_labels:
        raise DataError(
            path,
            number,
            "label",
            "the header row has no column 'label'",
            "add the label column (the correct ending's index), or pass require_labels=False "
            "for a file to predict on",
        )
    ident = next((columns[n] for n in ID_FIELDS if n in columns), None)
    return _Layout(
        path=path,
        columns=columns,
        endings=tuple(columns[f"ending{i}"] for i in range(count)),
        label=columns.get("label"),
        id=ident,
    )


def _fields(layout: _Layout, number: int, line: str) -> ChoiceExample:
    cells = _cells(layout.path, number, line)
    if len(cells) != len(layout.columns):
        raise DataError(
            layout.path,
            number,
            "columns",
            f"{len(cells)} fields, but the header has {len(layout.columns)}",
            'give every row the header\'s columns; quote a field holding a comma ("a, b")',
        )
    label: int | None = None
    if layout.label is not None:
        raw = cells[layout.label].strip()
        if not raw.isdigit() or int(raw) >= len(layout.endings):
            raise DataError(
                layout.path,
                number,
                "label",
                f"label {raw!r} is not the index of one of the {len(layout.endings)} endings",
                f"write 0..{len(layout.endings) - 1}",
            )
        label = int(raw)
    return ChoiceExample(
        context=cells[layout.columns["sent1"]],
        start=cells[layout.columns["sent2"]],
        endings=[cells[i] for i in layout.endings],
        label=label,
        id=cells[layout.id] if layout.id is not None else str(number),
        line=number,
    )


def _parse(layout: _Layout, handle: IO[bytes], offset: int, number: int) -> ChoiceExample:
    return _fields(layout, number, read_line(handle, offset, layout.path, number))


__all__ = ["read_swag"]
