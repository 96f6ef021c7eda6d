"""GLUE-style classification and regression files, in any tabular format.

The layout of the GLUE benchmark's ``train.tsv``/``dev.tsv`` (Wang et al., 2019, "GLUE") and
of Hugging Face ``run_glue``'s CSV/JSON files: columns are found by name, so extra columns
(``idx``, ``genre``, parse trees) are ignored. The file may be TSV, CSV, JSON Lines, a JSON
array, Parquet or a ``datasets`` folder (:mod:`ptm_core.finetune.data.tables`). See
``data_specs/glue_classification/``.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from ptm_core.data.errors import DataError
from ptm_core.data.text_cells import check_text
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.finetune.data.records import TableRecords, no_examples, to_int64, unknown_label
from ptm_core.finetune.data.tables import TableFile

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


@dataclass(frozen=True)
class GlueLayout:
    """Which columns of a table hold the text, the pair, the label and the id.

    Attributes:
        table: the file.
        kind: ``classification`` or ``regression``.
        text: the (first) text column.
        pair: the second text column of a pair task, else ``None``.
        label: the label column, ``None`` when the file has none (prediction).
        id: the id column (``id``, ``idx``, ``index``, ``guid``) if any.
        require_labels: whether every row must carry a label.
    """

    table: TableFile
    kind: str
    text: str
    pair: str | None
    label: str | None
    id: str | None
    require_labels: bool = True


def read_glue(
    path: str | Path,
    *,
    kind: Literal["classification", "regression"] = "classification",
    text_fields: Sequence[str] | None = None,
    label_field: str = "label",
    label_names: Sequence[str] | None = None,
    require_labels: bool = True,
) -> TableRecords:
    """Read a GLUE-style task file (TSV, CSV, JSONL, JSON, Parquet, ``datasets``), lazily.

    The text columns are ``text_fields`` (one name, or two for a sentence pair) or the first
    of :data:`TEXT_FIELD_CANDIDATES` that the file has (``sentence1`` + ``sentence2``,
    ``question1`` + ``question2``, ``question`` + ``sentence``, ``premise`` +
    ``hypothesis``, ``question`` + ``passage``, ``sentence``, ``text``). The label column
    is ``label_field``. The format comes from the suffix
    (:func:`~ptm_core.finetune.data.tables.table_format`: ``.csv``, ``.jsonl``/``.ndjson``,
    ``.json``, ``.parquet``, a ``save_to_disk`` folder; any other file is TSV: fields split
    on tabs, no quoting, as GLUE's files are). Blank lines are skipped; lines end at
    ``"\\n"`` only. The file is validated in one streaming pass (16 bytes kept per example)
    and examples are parsed when indexed.

    Args:
        path: the file.
        kind: ``classification`` (labels become indices into ``label_names``) or
            ``regression`` (labels are floats, e.g. STS-B's ``score``).
        text_fields: the text column(s) (``task.text_fields``), to override the automatic
            choice.
        label_field: the label column (``task.label_field``; MNLI's TSV calls it
            ``gold_label``).
        label_names: the label vocabulary (pass the train set's ``label_names`` when
            reading dev/test); ``None`` builds it from this file, sorted as strings.
        require_labels: when False, a file without the label column (a GLUE test file)
            gives examples with ``label=None``, and so does an empty, ``null`` or ``-1``
            label (the placeholder of Hugging Face ``datasets``' GLUE test splits).

    Returns:
        A lazy sequence of :class:`SentenceExample` with ``label_names`` (empty for
        regression) and ``path``.

    Raises:
        DataError: naming ``file:line`` (``file row N`` for Parquet, JSON arrays and
            ``datasets``) and the field: a missing file or column, a row with the wrong
            number of columns, invalid JSON or UTF-8, an empty or unknown label, a
            regression label that is not a number, or a file without examples.
    """
    if kind not in ("classification", "regression"):
        raise ValueError(f"kind must be 'classification' or 'regression', got {kind!r}")
    table = TableFile(path)
    layout = glue_layout(table, kind, text_fields, label_field, require_labels)
    keys, lines = array("q"), array("q")
    found: set[str] = set()
    known = set(label_names) if label_names is not None else None
    for key, number, values in table.scan():
        _text, _pair, label, _id = glue_fields(layout, number, values)
        if label is not None and kind == "classification":
            if known is not None and label not in known:
                raise _unknown(layout, number, label, label_names or [])
            found.add(label)
        keys.append(key)
        lines.append(number)
    if not keys:
        raise no_examples(table.path, "examples (a header row, then one example per line)")
    names: list[str] = []
    if kind == "classification" and layout.label is not None:
        names = list(label_names) if label_names is not None else sorted(found)
    parse = partial(_parse, layout, {name: i for i, name in enumerate(names)})
    return TableRecords(table, to_int64(keys), to_int64(lines), parse, names)


def glue_layout(
    table: TableFile,
    kind: str,
    text_fields: Sequence[str] | None,
    label_field: str,
    require_labels: bool,
) -> GlueLayout:
    """Choose the columns from the header (TSV, CSV), the first object's keys (JSONL) or
    the schema (Parquet, ``datasets``)."""
    names = table.columns
    where = table.where_columns
    number = table.header_line if table.by_line else None
    if text_fields is not None:
        chosen = tuple(text_fields)
        if len(chosen) not in (1, 2):
            raise ValueError(f"task.text_fields must name 1 or 2 columns, got {list(chosen)}")
        for name in chosen:
            if name not in names:
                raise table.error(
                    number,
                    name,
                    f"the {where} has no column {name!r} (it has {list(names)})",
                    f"add the column, or set task.text_fields to names from {list(names)}",
                )
    else:
        options = [c for c in TEXT_FIELD_CANDIDATES if all(n in names for n in c)]
        if not options:
            raise table.error(
                number,
                "sentence",
                f"the {where} has no text column (it has {list(names)})",
                "name the text column(s) sentence, or sentence1 and sentence2 "
                "(see data_specs/glue_classification/README.md), or set "
                f"task.text_fields=[{','.join(names[:2])}]",
            )
        chosen = options[0]
    label = label_field if label_field in names else None
    if label is None and require_labels:
        raise table.error(
            number,
            label_field,
            f"the {where} has no label column {label_field!r} (it has {list(names)})",
            "add the label column, or set task.label_field to the column that holds it",
        )
    return GlueLayout(
        table=table,
        kind=kind,
        text=chosen[0],
        pair=chosen[1] if len(chosen) == 2 else None,
        label=label,
        id=next((n for n in ID_FIELDS if n in names), None),
        require_labels=require_labels,
    )


def glue_fields(
    layout: GlueLayout, number: int, values: dict[str, Any]
) -> tuple[str, str | None, str | None, str]:
    """``(text, pair, raw label, id)`` of a row, validated."""
    table = layout.table
    for name in (layout.text, layout.pair, layout.label):
        if name is not None and name not in values:
            raise table.error(
                number,
                name,
                f"the object has no key {name!r}",
                f"give every line the keys of the first one ({list(table.columns)})",
            )
    text = _text(layout, number, values, layout.text)
    pair = _text(layout, number, values, layout.pair) if layout.pair is not None else None
    label: str | None = None
    if layout.label is not None:
        raw = values[layout.label]
        label = raw.strip() if isinstance(raw, str) else json.dumps(raw)
        if not layout.require_labels and label in ("", "null", "-1"):
            return text, pair, None, _ident(layout, number, values)  # HF test splits: -1
        if raw is None:
            raise table.error(
                number,
                layout.label,
                "null label",
                "write the label (a file to predict on needs no label column)",
            )
        if not label:
            raise table.error(
                number, layout.label, "empty label", "write the label, or drop the row"
            )
        if layout.kind == "regression":
            try:
                float(label)
            except ValueError:
                raise table.error(
                    number,
                    layout.label,
                    f"regression label {label!r} is not a number",
                    "write a number such as 3.8",
                ) from None
    return text, pair, label, _ident(layout, number, values)


def _ident(layout: GlueLayout, number: int, values: dict[str, Any]) -> str:
    if layout.id is not None and values.get(layout.id) is not None:
        return str(values[layout.id])
    return str(number)


def _text(layout: GlueLayout, number: int, values: dict[str, Any], name: str) -> str:
    value = values[name]
    if not isinstance(value, str):
        raise layout.table.error(
            number,
            name,
            f"expected a string, got {type(value).__name__}",
            "write the text as a string",
        )
    return check_text(*layout.table.at(number), name, value)


def _unknown(layout: GlueLayout, number: int, label: str, names: Sequence[str]) -> DataError:
    error = unknown_label(layout.table.path, number, layout.label or "label", label, names)
    if layout.table.by_line:
        return error
    return layout.table.error(number, error.field, error.problem, error.fix)


def glue_example(
    layout: GlueLayout, index: dict[str, int], values: dict[str, Any], number: int
) -> SentenceExample:
    """The :class:`SentenceExample` of a row (``index``: label name -> class index)."""
    text, pair, raw, ident = glue_fields(layout, number, values)
    label: int | float | None = None
    if raw is not None:
        if layout.kind == "regression":
            label = float(raw)
        elif raw in index:
            label = index[raw]
        else:
            raise _unknown(layout, number, raw, list(index))
    return SentenceExample(text=text, pair=pair, label=label, id=ident, line=number)


def _parse(
    layout: GlueLayout, index: dict[str, int], values: dict[str, Any], number: int
) -> SentenceExample:
    return glue_example(layout, index, values, number)


__all__ = ["TEXT_FIELD_CANDIDATES", "GlueLayout", "glue_example", "glue_layout", "read_glue"]
