"""The labelled files of XLM's zero-shot fine-tuning: ``label<TAB>sentence`` lines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ptm_core.data.errors import DataError
from ptm_core.finetune.data.examples import SentenceExample


def read_two_column_tsv(path: str | Path, fields: tuple[str, str]) -> list[tuple[str, str, int]]:
    """The ``first<TAB>second`` lines of a file without a header (blank lines skipped).

    Args:
        path: the file.
        fields: the two columns' names, for messages (``("label", "sentence")``).

    Returns:
        ``(first, second, line number)`` per line, both stripped.

    Raises:
        DataError: ``file:line`` and the field: a missing file, a line without exactly one
            tab, an empty column, or a file without lines.
    """
    path = Path(path)
    first, second = fields
    layout = f"{first}<TAB>{second}"
    if not path.is_file():
        raise DataError(path, None, "path", "no such file", f"give a {layout} .tsv file")
    raw: list[tuple[str, str, int]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                raise DataError(
                    path,
                    number,
                    "columns",
                    f"{len(parts)} tab-separated fields, expected 2",
                    f"write each example as {layout} (no header row, no tab inside the {second})",
                )
            a, b = parts[0].strip(), parts[1].strip()
            if not a or not b:
                which = first if not a else second
                raise DataError(path, number, which, f"empty {which}", f"give a non-empty {which}")
            raw.append((a, b, number))
    if not raw:
        raise DataError(path, None, "examples", "no examples", f"add {layout} lines")
    return raw


def read_language_tsv(
    path: str | Path, label_names: Sequence[str] | None = None
) -> tuple[list[SentenceExample], list[str]]:
    """Read a ``label<TAB>sentence`` file without a header row.

    The layout of ``data_specs/monolingual_corpus/classification/<lang>.tsv``. (GLUE-style
    files have a header row naming their columns: read those with
    :func:`ptm_core.finetune.data.glue.read_glue`.) Blank lines are skipped.

    Args:
        path: the file.
        label_names: the label vocabulary (pass the training file's when reading dev
            files); ``None`` builds it from this file, sorted.

    Returns:
        ``(examples, label_names)``: :class:`SentenceExample` rows whose ``label`` indexes
        ``label_names``.

    Raises:
        DataError: ``file:line`` and the field: a missing file, a line without exactly
            one tab, an empty label or sentence, a label outside ``label_names``, or a
            file without examples.
    """
    raw = read_two_column_tsv(path, ("label", "sentence"))
    names = list(label_names) if label_names is not None else sorted({r[0] for r in raw})
    index = {name: i for i, name in enumerate(names)}
    examples = []
    for label, text, number in raw:
        if label not in index:
            raise DataError(
                path,
                number,
                "label",
                f"unknown label {label!r}",
                f"use one of the training labels {names}",
            )
        examples.append(SentenceExample(text, None, index[label], str(number), number))
    return examples, names


__all__ = ["read_language_tsv", "read_two_column_tsv"]
