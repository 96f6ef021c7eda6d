"""The rows ``ptm predict`` reads: a task's input file, streamed as ``(values, example)``.

``values`` is what the output record keeps of the input row (its columns, or for CoNLL and
SQuAD files the sentence's line and words, the question's id and text); ``example`` is what
the task's featurizer takes. Any task reads its own format, and the row-based kinds read
every table format of :mod:`ptm_core.finetune.data.tables`:

- classification, regression: GLUE-style columns (``task.text_fields`` or the usual names);
- multiple choice: SWAG columns (``sent1``, ``sent2``, ``ending0``...);
- tagging: a CoNLL file (first column the word; a tag column, if any, is ignored), or a
  table with a ``tokens``/``words`` list column or a ``text``/``sentence`` column (split on
  whitespace);
- qa: a SQuAD JSON file, or a table with ``question`` and ``context`` columns (and ``id``).

Gold labels in the input are kept as columns but never read, so a file with labels the
model has not seen predicts as well as one without.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ptm_core.finetune.data.conll import read_conll
from ptm_core.finetune.data.examples import QAExample, TaggedExample
from ptm_core.finetune.data.glue import glue_example, glue_layout
from ptm_core.finetune.data.squad import read_squad
from ptm_core.finetune.data.swag import swag_example, swag_layout, swag_table
from ptm_core.finetune.data.tables import TableFile, table_format
from ptm_core.finetune.task_spec import TaskSpec

Row = tuple[dict[str, Any], Any]
WORD_COLUMNS = ("tokens", "words")
TEXT_COLUMNS = ("text", "sentence")
QA_ID_COLUMNS = ("id", "idx", "qid")


def prediction_rows(task: TaskSpec, path: str | Path) -> Iterator[Row]:
    """Stream ``(values, example)`` for every row of ``path``, in the file's order.

    Raises:
        DataError: naming the file, its line (or row) and the column that is wrong.
    """
    path = Path(path)
    if task.format == "glue":
        yield from _glue_rows(task, TableFile(path))
    elif task.format == "swag":
        table = swag_table(path)
        layout = dataclasses.replace(swag_layout(table, require_labels=False), label=None)
        for _key, number, values in table.scan():
            yield values, swag_example(layout, values, number)
    elif task.format == "conll":
        if _is_table(path):
            yield from _tagging_table_rows(TableFile(path))
        else:
            for example in read_conll(path, tag_column=None):
                words = list(example.words)
                yield {"line": example.line, "words": words}, _tagged(example)
    else:
        if path.suffix.lower() == ".json" and table_format(path) == "jsonl" and _is_squad(path):
            for qa in read_squad(path, check_answers=False):
                yield {"id": qa.id, "question": qa.question}, qa
        else:
            yield from _qa_table_rows(TableFile(path))


def _is_table(path: Path) -> bool:
    return path.is_dir() or path.suffix.lower() in (
        ".csv",
        ".jsonl",
        ".ndjson",
        ".json",
        ".parquet",
    )


def _is_squad(path: Path) -> bool:
    """A ``.json`` that starts as one object is a SQuAD document unless its first line
    is a whole object (JSON Lines)."""
    with path.open("rb") as handle:
        first = handle.readline().strip()
    try:
        value = json.loads(first)
    except ValueError:
        return True
    return isinstance(value, dict) and "data" in value and "question" not in value


def _glue_rows(task: TaskSpec, table: TableFile) -> Iterator[Row]:
    kind = "regression" if task.kind == "regression" else "classification"
    layout = glue_layout(table, kind, task.text_fields, task.label_field, require_labels=False)
    layout = dataclasses.replace(layout, label=None)
    for _key, number, values in table.scan():
        yield values, glue_example(layout, {}, values, number)


def _tagged(example: TaggedExample) -> TaggedExample:
    # Tag 0 on every word marks each word's first piece for the featurizer; never read.
    return dataclasses.replace(example, tags=[0] * len(example.words))


def _tagging_table_rows(table: TableFile) -> Iterator[Row]:
    words_column = next((c for c in WORD_COLUMNS if c in table.columns), None)
    text_column = next((c for c in TEXT_COLUMNS if c in table.columns), None)
    if words_column is None and text_column is None:
        raise table.error(
            table.header_line if table.by_line else None,
            "tokens",
            f"the {table.where_columns} has no tokens, words, text or sentence column "
            f"(it has {list(table.columns)})",
            "give the words as a list column 'tokens' (as Hugging Face NER datasets), or "
            "the sentence as a 'text' column",
        )
    for _key, number, values in table.scan():
        if words_column is not None:
            words = values.get(words_column)
            if isinstance(words, str):  # a CSV cell: the words, space-separated
                words = words.split()
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise table.error(
                    number,
                    words_column,
                    f"expected a list of words, got {type(words).__name__}",
                    'write the words as a list of strings, e.g. ["EU", "rejects"]',
                )
        else:
            text = values.get(text_column)  # type: ignore[arg-type]
            if not isinstance(text, str):
                raise table.error(
                    number,
                    str(text_column),
                    f"expected a string, got {type(text).__name__}",
                    "write the sentence as a string",
                )
            words = text.split()
        if not words:
            raise table.error(
                number, words_column or str(text_column), "no words", "drop the empty row"
            )
        yield values, TaggedExample(words=list(words), tags=[0] * len(words), line=number)


def _qa_table_rows(table: TableFile) -> Iterator[Row]:
    number_of = table.header_line if table.by_line else None
    for name in ("question", "context"):
        if name not in table.columns:
            raise table.error(
                number_of,
                name,
                f"the {table.where_columns} has no column {name!r} (it has {list(table.columns)})",
                "give QA rows question and context columns (and an id), or a SQuAD JSON file",
            )
    ident = next((c for c in QA_ID_COLUMNS if c in table.columns), None)
    for _key, number, values in table.scan():
        texts = {}
        for name in ("question", "context"):
            value = values.get(name)
            if not isinstance(value, str) or not value.strip():
                raise table.error(
                    number,
                    name,
                    f"expected a non-empty string, got {value!r:.40}",
                    f"write the {name}",
                )
            texts[name] = value
        qid = (
            str(values[ident])
            if ident is not None and values.get(ident) is not None
            else str(number)
        )
        yield (
            values,
            QAExample(
                id=qid,
                question=texts["question"],
                context=texts["context"],
                answers=[],
                is_impossible=False,
                path=f"row {number}",
            ),
        )


__all__ = ["Row", "prediction_rows"]
