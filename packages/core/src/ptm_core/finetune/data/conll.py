"""CoNLL-2003 column files for tagging (Tjong Kim Sang & De Meulder, 2003).

One token per line, columns separated by white space (``word POS chunk NER`` in the
shared task's files), a blank line between sentences, ``-DOCSTART-`` lines between
documents. See ``data_specs/conll_tagging/``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Literal

from ptm_core.data.errors import DataError
from ptm_core.data.lines import decode_line
from ptm_core.data.text_cells import check_text
from ptm_core.finetune.data.examples import TaggedExample
from ptm_core.finetune.data.records import (
    TaskRecords,
    lines_at,
    no_examples,
    to_int64,
    unknown_label,
)

Scheme = Literal["BIO", "IOB1", "none"]
DOCSTART = "-DOCSTART-"


@dataclass(frozen=True)
class _Layout:
    path: Path
    tag_column: int | None  # None: a file without tags
    scheme: str


def read_conll(
    path: str | Path,
    *,
    tag_column: int | None = -1,
    scheme: Scheme = "BIO",
    label_names: Sequence[str] | None = None,
) -> TaskRecords:
    """Read a CoNLL-2003 style column file, lazily (one streaming pass validates it).

    The word is the first column, the tag the column ``tag_column`` (the last by default;
    ``None`` for a file to predict on, whose sentences then have ``tags=None``). Blank
    lines end sentences; ``-DOCSTART-`` lines are skipped and end a sentence too. Lines end
    at ``"\\n"`` only.

    Tags are checked against ``scheme``:

    - ``"BIO"`` (IOB2, what Hugging Face's ``conll2003`` and most NER files use): ``O``,
      ``B-X`` or ``I-X``, and ``I-X`` only after ``B-X``/``I-X`` of the same type.
    - ``"IOB1"`` (the original CoNLL-2003 files): an entity starts with ``I-X``; ``B-X``
      only separates two adjacent entities of type ``X``. Tags are converted to BIO as
      they are read, so ``label_names`` and the model see BIO.
    - ``"none"``: any non-empty tag (e.g. POS tags).

    Args:
        path: the file (UTF-8).
        tag_column: index of the tag column (negative counts from the end), or ``None``.
        scheme: the tagging scheme to check (above).
        label_names: the tag vocabulary (pass the train set's ``label_names`` for dev and
            test); ``None`` builds it from this file, sorted.

    Returns:
        A lazy sequence of :class:`TaggedExample` with ``label_names`` (tag names).

    Raises:
        DataError: ``file:line`` and field ``tag`` (ill-formed for the scheme, unknown,
            missing column) or ``encoding``, or a file without sentences.
    """
    path = Path(path)
    if scheme not in ("BIO", "IOB1", "none"):
        raise ValueError(f"scheme must be 'BIO', 'IOB1' or 'none', got {scheme!r}")
    layout = _Layout(path, tag_column, scheme)
    offsets, lines = array("q"), array("q")
    found: set[str] = set()
    known = set(label_names) if label_names is not None else None
    previous: str | None = None  # tag of the previous token of the sentence (as written)
    in_sentence = False
    for offset, number, line in lines_at(path):
        token = _token(layout, number, line)
        if token is None:
            previous, in_sentence = None, False
            continue
        if token[1] is not None:
            bio = _check_tag(layout, number, token[1], previous)
            previous = token[1]
            if known is not None and bio not in known:
                raise unknown_label(path, number, "tag", bio, label_names or [])
            found.add(bio)
        if not in_sentence:
            offsets.append(offset)
            lines.append(number)
            in_sentence = True
    if not offsets:
        raise no_examples(path, "sentences (one token per line, a blank line between sentences)")
    names = list(label_names) if label_names is not None else sorted(found)
    parse = partial(_parse, layout, {name: i for i, name in enumerate(names)})
    return TaskRecords(path, to_int64(offsets), to_int64(lines), parse, names)


def _token(layout: _Layout, number: int, line: str) -> tuple[str, str | None] | None:
    """``(word, tag)`` of a token line; ``None`` for a blank or ``-DOCSTART-`` line."""
    columns = line.split()
    if not columns or columns[0] == DOCSTART:
        return None
    check_text(layout.path, number, "token", line)
    if layout.tag_column is None:
        return columns[0], None
    if len(columns) < 2:
        raise DataError(
            layout.path,
            number,
            "tag",
            f"the token line {line!r} has no tag column",
            "write the word, then the tag, separated by a space (a blank line ends a sentence)",
        )
    try:
        tag = columns[layout.tag_column]
    except IndexError:
        raise DataError(
            layout.path,
            number,
            "tag",
            f"tag column {layout.tag_column} does not exist ({len(columns)} columns)",
            "give every token line the same columns, or pass tag_column=",
        ) from None
    return columns[0], tag


def _check_tag(layout: _Layout, number: int, tag: str, previous: str | None) -> str:
    """The tag in BIO form, after checking it against the scheme and the previous tag."""
    if layout.scheme == "none":
        return tag
    fix_prefix = "write O, B-<TYPE> or I-<TYPE> (e.g. B-PER)"
    if tag == "O":
        return tag
    prefix, _, kind = tag.partition("-")
    if prefix not in ("B", "I") or not kind:
        raise DataError(layout.path, number, "tag", f"tag {tag!r} is not O, B-X or I-X", fix_prefix)
    prev_kind = previous.partition("-")[2] if previous and previous != "O" else None
    if layout.scheme == "BIO":
        if prefix == "I" and prev_kind != kind:
            raise DataError(
                layout.path,
                number,
                "tag",
                f"{tag!r} continues an entity, but the previous tag is {previous or 'none'!r}",
                f"start the entity with B-{kind}; a file in IOB1 (the original CoNLL-2003 "
                "files) is read with scheme='IOB1'",
            )
        return tag
    # IOB1: B-X only between two adjacent entities of type X; convert to BIO.
    if prefix == "B" and prev_kind != kind:
        raise DataError(
            layout.path,
            number,
            "tag",
            f"in IOB1, {tag!r} may only follow a tag of type {kind} (previous: "
            f"{previous or 'none'!r})",
            f"write I-{kind}, or read a BIO file with scheme='BIO'",
        )
    if prefix == "I" and prev_kind != kind:
        return f"B-{kind}"
    return tag


def _parse(
    layout: _Layout, index: dict[str, int], handle: IO[bytes], offset: int, number: int
) -> TaggedExample:
    handle.seek(offset)
    first = number
    words: list[str] = []
    tags: list[int] = []
    previous: str | None = None
    for raw in handle:
        token = _token(layout, number, decode_line(raw, layout.path, number))
        if token is None:
            break
        words.append(token[0])
        if token[1] is not None:
            bio = _check_tag(layout, number, token[1], previous)
            previous = token[1]
            if bio not in index:
                raise unknown_label(layout.path, number, "tag", bio, list(index))
            tags.append(index[bio])
        number += 1
    return TaggedExample(
        words=words, tags=tags if layout.tag_column is not None else None, line=first
    )


__all__ = ["DOCSTART", "read_conll"]
