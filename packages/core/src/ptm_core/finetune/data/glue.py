"""GLUE-style classification and regression files: TSV with a header row, or JSONL.

The layout of the GLUE benchmark's ``train.tsv``/``dev.tsv`` (Wang et al., 2019, "GLUE") and
of Hugging Face ``run_glue``'s CSV/JSON files: columns are found by name, so extra columns
(``idx``, ``genre``, parse trees) are ignored. See ``data_specs/glue_classification/``.
"""

from __future__ import annotations

import dataclasses
import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any, Literal

from ptm_core.data.errors import DataError
from ptm_core.data.text_cells import check_text, loads_json
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.records import (
    TaskRecords,
    lines_at,
    no_examples,
    read_line,
    to_int64,
    unknown_label,
)

#: Text columns tried in order when ``text_fields`` is not given (GLUE/SuperGLUE names).
TEXT_FIELD_CANDIDATES: tuple[tuple[str, ...], ...] = (
    ("sentence1", "sentence2"),  # MRPC, RTE, STS-B, WNLI, MNLI
    ("question1", "question2"),  # QQP
    ("question", "sentence"),  # QNLI
    ("premise", "hypothesis"),  # MNLI/SNLI JSONL, CB
    ("question", "passage"),  # BoolQ
    ("sentence",),  # SST-2, CoLA
    ("text",),
)
ID_FIELDS = ("id", "idx", "index", "guid")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass(frozen=True)
class _Layout:
    """Where the fields of a file are: TSV column indices, or JSON keys."""

    path: Path
    is_json: bool
    kind: str
    text: str
    pair: str | None
    label: str | None
    id: str | None
    columns: tuple[str, ...] = ()  # TSV header
    require_labels: bool = True


def read_glue(
    path: str | Path,
    *,
    kind: Literal["classification", "regression"] = "classification",
    text_fields: Sequence[str] | None = None,
    label_field: str = "label",
    label_names: Sequence[str] | None = None,
    require_labels: bool = True,
) -> TaskRecords:
    """Read a GLUE-style TSV (header row, tab-separated) or JSONL file, lazily.

    The text columns are ``text_fields`` (one name, or two for a sentence pair) or the first
    of :data:`TEXT_FIELD_CANDIDATES` that the file has (``sentence1`` + ``sentence2``,
    ``question1`` + ``question2``, ``question`` + ``sentence``, ``premise`` +
    ``hypothesis``, ``question`` + ``passage``, ``sentence``, ``text``). The label column
    is ``label_field``. A ``.jsonl``/``.json``/``.ndjson`` file holds one JSON object per
    line with the same keys; any other file is TSV (fields split on tabs, no quoting, as
    GLUE's files are). Blank lines are skipped; lines end at ``"\\n"`` only. The file is
    validated in one streaming pass (16 bytes kept per example) and examples are parsed
    when indexed.

    Args:
        path: the file.
        kind: ``classification`` (labels become indices into ``label_names``) or
            ``regression`` (labels are floats, e.g. STS-B's ``score``).
        text_fields: the text column(s), to override the automatic choice.
        label_field: the label column (MNLI's TSV calls it ``gold_label``).
        label_names: the label vocabulary (pass the train set's ``label_names`` when
            reading dev/test); ``None`` builds it from this file, sorted as strings.
        require_labels: when False, a file without the label column (a GLUE test file)
            gives examples with ``label=None``, and so does an empty, ``null`` or ``-1``
            label (the placeholder of Hugging Face ``datasets``' GLUE test splits).

    Returns:
        A lazy sequence of :class:`SentenceExample` with ``label_names`` (empty for
        regression) and ``path``.

    Raises:
        DataError: naming ``file:line`` and the field: a missing file or column, a row
            with the wrong number of columns, invalid JSON or UTF-8, an empty or unknown
            label, a regression label that is not a number, or a file without examples.
    """
    path = Path(path)
    if kind not in ("classification", "regression"):
        raise ValueError(f"kind must be 'classification' or 'regression', got {kind!r}")
    is_json = path.suffix.lower() in JSONL_SUFFIXES
    layout: _Layout | None = None
    offsets, lines = array("q"), array("q")
    found: set[str] = set()
    known = set(label_names) if label_names is not None else None
    for offset, number, line in lines_at(path):
        if not line.strip():
            continue
        if layout is None:
            layout = _layout(path, is_json, kind, number, line, text_fields, label_field)
            layout = _check_label_column(layout, number, require_labels, label_field)
            if not is_json:
                continue  # the TSV header row
        _text, _pair, label, _id = _fields(layout, number, line)
        if label is not None and kind == "classification":
            if known is not None and label not in known:
                raise unknown_label(path, number, layout.label or "label", label, label_names or [])
            found.add(label)
        offsets.append(offset)
        lines.append(number)
    if not offsets or layout is None:
        raise no_examples(path, "examples (a header row, then one example per line)")
    names: list[str] = []
    if kind == "classification" and layout.label is not None:
        names = list(label_names) if label_names is not None else sorted(found)
    parse = partial(_parse, layout, {name: i for i, name in enumerate(names)})
    return TaskRecords(path, to_int64(offsets), to_int64(lines), parse, names)


def _layout(
    path: Path,
    is_json: bool,
    kind: str,
    number: int,
    line: str,
    text_fields: Sequence[str] | None,
    label_field: str,
) -> _Layout:
    """Choose the columns from the header (TSV) or the first object's keys (JSONL)."""
    if is_json:
        names = tuple(_json_object(path, number, line))
    else:
        names = tuple(name.strip() for name in line.split("\t"))
    where = "header row" if not is_json else "first object"
    if text_fields is not None:
        chosen = tuple(text_fields)
        if len(chosen) not in (1, 2):
            raise ValueError(f"text_fields must name 1 or 2 columns, got {list(chosen)}")
        for name in chosen:
            if name not in names:
                raise DataError(
                    path,
                    number,
                    name,
                    f"the {where} has no column {name!r} (it has {list(names)})",
                    f"add the column, or pass text_fields= with names from {list(names)}",
                )
    else:
        options = [c for c in TEXT_FIELD_CANDIDATES if all(n in names for n in c)]
        if not options:
            raise DataError(
                path,
                number,
                "sentence",
                f"the {where} has no text column (it has {list(names)})",
                "name the text column(s) sentence, or sentence1 and sentence2 "
                "(see data_specs/glue_classification/README.md), or pass text_fields=",
            )
        chosen = options[0]
    ident = next((n for n in ID_FIELDS if n in names), None)
    label = label_field if label_field in names else None
    return _Layout(
        path=path,
        is_json=is_json,
        kind=kind,
        text=chosen[0],
        pair=chosen[1] if len(chosen) == 2 else None,
        label=label,
        id=ident,
        columns=() if is_json else names,
    )


def _check_label_column(
    layout: _Layout, number: int, require_labels: bool, label_field: str
) -> _Layout:
    if layout.label is None and require_labels:
        where = "first object" if layout.is_json else "header row"
        raise DataError(
            layout.path,
            number,
            label_field,
            f"the {where} has no label column {label_field!r}",
            "add the label column, pass label_field= with its name, or "
            "require_labels=False for a file to predict on",
        )
    return dataclasses.replace(layout, require_labels=require_labels)


def _json_object(path: Path, number: int, line: str) -> dict[str, Any]:
    value = loads_json(path, number, line, "write one JSON object per line")
    if not isinstance(value, dict):
        raise DataError(
            path,
            number,
            "json",
            f"expected a JSON object, got {type(value).__name__}",
            'write one object per line, e.g. {"sentence": "...", "label": "..."}',
        )
    return value


def _fields(layout: _Layout, number: int, line: str) -> tuple[str, str | None, str | None, str]:
    """``(text, pair, raw label, id)`` of a data line, validated."""
    path = layout.path
    if layout.is_json:
        row = _json_object(path, number, line)
        values: dict[str, Any] = row
        for name in (layout.text, layout.pair, layout.label):
            if name is not None and name not in row:
                raise DataError(
                    path,
                    number,
                    name,
                    f"the object has no key {name!r}",
                    f"give every line the keys of the first one ({list(row)})",
                )
    else:
        cells = line.split("\t")
        if len(cells) != len(layout.columns):
            raise DataError(
                path,
                number,
                "columns",
                f"{len(cells)} tab-separated columns, but the header has {len(layout.columns)} "
                f"({list(layout.columns)})",
                "separate the columns with one tab each; a tab inside a sentence must be "
                "replaced by a space",
            )
        values = dict(zip(layout.columns, cells, strict=True))
    text = _text(layout, number, values, layout.text)
    pair = _text(layout, number, values, layout.pair) if layout.pair is not None else None
    label: str | None = None
    if layout.label is not None:
        raw = values[layout.label]
        label = raw.strip() if isinstance(raw, str) else json.dumps(raw)
        if not layout.require_labels and label in ("", "null", "-1"):
            return text, pair, None, _ident(layout, number, values)  # HF test splits: -1
        if raw is None:
            raise DataError(
                path,
                number,
                layout.label,
                "null label",
                "write the label, or pass require_labels=False for a file to predict on",
            )
        if not label:
            raise DataError(
                path, number, layout.label, "empty label", "write the label, or drop the line"
            )
        if layout.kind == "regression":
            try:
                float(label)
            except ValueError:
                raise DataError(
                    path,
                    number,
                    layout.label,
                    f"regression label {label!r} is not a number",
                    "write a number such as 3.8",
                ) from None
    return text, pair, label, _ident(layout, number, values)


def _ident(layout: _Layout, number: int, values: dict[str, Any]) -> str:
    if layout.id is not None and layout.id in values:
        return str(values[layout.id])
    return str(number)


def _text(layout: _Layout, number: int, values: dict[str, Any], name: str) -> str:
    value = values[name]
    if not isinstance(value, str):
        raise DataError(
            layout.path,
            number,
            name,
            f"expected a string, got {type(value).__name__}",
            "write the text as a JSON string",
        )
    return check_text(layout.path, number, name, value)


def _parse(
    layout: _Layout, index: dict[str, int], handle: IO[bytes], offset: int, number: int
) -> SentenceExample:
    text, pair, raw, ident = _fields(layout, number, read_line(handle, offset, layout.path, number))
    label: int | float | None = None
    if raw is not None:
        if layout.kind == "regression":
            label = float(raw)
        elif raw in index:
            label = index[raw]
        else:
            raise unknown_label(layout.path, number, layout.label or "label", raw, list(index))
    return SentenceExample(text=text, pair=pair, label=label, id=ident, line=number)


__all__ = ["TEXT_FIELD_CANDIDATES", "read_glue"]
