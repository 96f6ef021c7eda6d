"""K-BERT's TSV inputs, read lazily: one streaming pass validates, then rows by index.

A fine-tuning train file can hold millions of sentences (the K-BERT paper's book reviews
and news sets hold 20k-500k). :func:`read_labeled_tsv` and :func:`read_tagged_tsv` stream
the file once, line by line with :func:`ptm_core.data.lines.decode_line` (flat memory,
``file:line`` errors), keep only each example's byte offset and line number (16 bytes) plus the label
names, and return a :class:`Sequence` that parses an example when it is asked for (a seek
and one line, or one sentence block, decoded with :func:`~ptm_core.data.lines.decode_line`).
Words are segmented at access time, so nothing per sentence is held in Python objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Generic, TypeVar

import numpy as np

from ptm_core.data.errors import DataError
from ptm_core.data.file_records import FileRecords
from ptm_core.data.lines import decode_line
from ptm_core.data.text_cells import check_text
from ptm_knowledge.kbert.model import segment_words

T = TypeVar("T")


@dataclass(frozen=True)
class LabeledSentence:
    """A classification example: ``label`` index and one or two word lists."""

    words: list[str]
    label: int
    second: list[str] | None = None


@dataclass(frozen=True)
class TaggedSentence:
    """A tagging (NER) example: one tag index per word."""

    words: list[str]
    tags: list[int]


def _empty_file(path: Path, what: str) -> ValueError:
    return DataError(
        path, None, "examples", f"no {what} in the file", f"add {what} (or give the right file)"
    )


class LazyTsv(FileRecords, Generic[T]):
    """Examples of a validated TSV file, parsed per index from byte offsets.

    Args:
        path: the file.
        offsets: ``(N,)`` int64 byte offset of each example's first line.
        lines: ``(N,)`` int64 its 1-based line number (for errors).
        parse: ``(handle, offset, line) -> example``.
    """

    def __init__(
        self,
        path: Path,
        offsets: np.ndarray,
        lines: np.ndarray,
        parse: Callable[[IO[bytes], int, int], T],
    ) -> None:
        super().__init__(path)
        self.offsets, self.lines, self._parse = offsets, lines, parse

    def __len__(self) -> int:
        return len(self.offsets)

    def _build(self, index: int) -> T:
        return self._parse(self.handle(), int(self.offsets[index]), int(self.lines[index]))


def _labeled_fields(
    path: Path, number: int, line: str, header: Sequence[str] | None = None
) -> list[str] | None:
    """The fields of a data line, ``None`` for blank/comment lines; checks the layout.

    Under a header, a line has exactly the header's columns (a third field under
    ``label<TAB>text_a`` was read as a sentence pair the header does not announce).
    """
    if not line.strip() or line.startswith("#"):
        return None
    fields = line.split("\t")
    if len(fields) not in (2, 3):
        raise DataError(
            path,
            number,
            "columns",
            f"expected label<TAB>text_a[<TAB>text_b], got {len(fields)} fields",
            "separate the columns with one tab",
        )
    if header is not None and len(fields) != len(header):
        raise DataError(
            path,
            number,
            "columns",
            f"{len(fields)} tab-separated fields, but the header has {len(header)} "
            f"({'<TAB>'.join(header)})",
            "give every line the header's columns; a tab inside a sentence must be a space",
        )
    for name, text in zip(("text_a", "text_b"), fields[1:], strict=False):
        check_text(path, number, name, text)
        if not text.strip():
            raise DataError(
                path, number, name, f"empty {name}", "write the sentence, or drop the line"
            )
    if not fields[0].strip():
        raise DataError(
            path,
            number,
            "label",
            "empty label",
            "write the class name before the first tab, or drop the line",
        )
    return fields


def read_labeled_tsv(
    path: str | Path, labels: Sequence[str] | None = None
) -> tuple[LazyTsv[LabeledSentence], list[str]]:
    """Read ``label<TAB>text_a[<TAB>text_b]`` lines (the reference K-BERT format), lazily.

    A first line starting with ``label`` is a header; lines starting with ``#`` are comments.
    The file is UTF-8; a byte-order mark is ignored (it would otherwise glue itself to the
    first label and make a class of its own). The whole file is validated in one streaming
    pass (memory: 16 bytes per example); examples are parsed when indexed.

    Args:
        path: the TSV file.
        labels: label names in index order; ``None`` = sorted names found in the file.

    Returns:
        The examples (a lazily parsed sequence of :class:`LabeledSentence`) and the label
        names.

    Raises:
        ValueError: a missing file or one without examples, invalid UTF-8, a malformed
            line, an empty or unknown label, naming ``file:line``.
    """
    path = Path(path)
    offsets, lines = array("q"), array("q")
    found: set[str] = set()
    known = set(labels) if labels is not None else None
    header: list[str] | None = None
    for start, number, line in _lines_at(path):
        if not lines and header is None and line.startswith("label\t"):
            header = [cell.strip() for cell in line.split("\t")]
            continue
        fields = _labeled_fields(path, number, line, header)
        if fields is None:
            continue
        if known is not None and fields[0] not in known:
            raise ValueError(
                f"{path}:{number}: label {fields[0]!r} is not one of {list(labels or [])}; fix "
                "the label or pass labels= with every label name"
            )
        found.add(fields[0])
        offsets.append(start)
        lines.append(number)
    if not offsets:
        raise _empty_file(path, "labelled sentences")
    names = list(labels) if labels is not None else sorted(found)
    index = {name: i for i, name in enumerate(names)}

    parse = partial(_parse_labeled, path, index)  # a partial: pickles into DataLoader workers
    return LazyTsv(path, _int64(offsets), _int64(lines), parse), names


def _parse_labeled(
    path: Path, index: dict[str, int], handle: IO[bytes], offset: int, number: int
) -> LabeledSentence:
    handle.seek(offset)
    fields = _labeled_fields(path, number, decode_line(handle.readline(), path, number))
    if fields is None or fields[0] not in index:
        raise DataError(path, number, "label", "the line changed since the file was read", "re-run")
    second = segment_words(fields[2]) if len(fields) == 3 else None
    return LabeledSentence(segment_words(fields[1]), index[fields[0]], second)


def _tag_fields(path: Path, number: int, line: str) -> tuple[str, str] | None:
    """``(word, tag)`` of a token line, ``None`` for comments; checks the layout."""
    if line.startswith("#"):
        return None
    fields = line.split("\t")
    if len(fields) != 2 or not fields[0]:
        raise ValueError(
            f"{path}:{number}: expected word<TAB>tag, got {line!r}; one token per line, "
            "a blank line between sentences"
        )
    if not fields[1].strip():
        raise DataError(path, number, "tag", "empty tag", "give every token a tag")
    return fields[0], fields[1]


def read_tagged_tsv(
    path: str | Path, labels: Sequence[str] | None = None
) -> tuple[LazyTsv[TaggedSentence], list[str]]:
    """Read CoNLL-style ``word<TAB>tag`` lines, a blank line between sentences, lazily.

    One streaming pass validates every line and records where each sentence starts;
    sentences are parsed when indexed.

    Args:
        path: the file (UTF-8; a byte-order mark is ignored).
        labels: tag names in index order; ``None`` = sorted names found in the file.

    Raises:
        ValueError: a missing or empty file, invalid UTF-8, a malformed line, an empty or
            unknown tag, naming ``file:line``.
    """
    path = Path(path)
    offsets, lines = array("q"), array("q")
    found: set[str] = set()
    known = set(labels) if labels is not None else None
    in_sentence = False
    for start, number, line in _lines_at(path):
        if not line.strip():
            in_sentence = False
            continue
        token = _tag_fields(path, number, line)
        if token is None:
            continue
        if known is not None and token[1] not in known:
            raise ValueError(
                f"{path}:{number}: tag {token[1]!r} is not one of {list(labels or [])}; fix the "
                "tag or pass labels= with every tag name"
            )
        found.add(token[1])
        if not in_sentence:
            offsets.append(start)
            lines.append(number)
            in_sentence = True
    if not offsets:
        raise _empty_file(path, "tagged sentences")
    names = list(labels) if labels is not None else sorted(found)
    index = {name: i for i, name in enumerate(names)}

    parse = partial(_parse_tagged, path, index)
    return LazyTsv(path, _int64(offsets), _int64(lines), parse), names


def _parse_tagged(
    path: Path, index: dict[str, int], handle: IO[bytes], offset: int, number: int
) -> TaggedSentence:
    handle.seek(offset)
    words: list[str] = []
    tags: list[int] = []
    for raw in handle:
        line = decode_line(raw, path, number)
        if not line.strip():
            break
        token = _tag_fields(path, number, line)
        if token is not None:
            if token[1] not in index:
                raise DataError(
                    path, number, "tag", "the line changed since the file was read", "re-run"
                )
            words.append(token[0])
            tags.append(index[token[1]])
        number += 1
    return TaggedSentence(words, tags)


def _lines_at(path: Path) -> Iterator[tuple[int, int, str]]:
    """``(byte offset, line number, text)`` of every line, streamed: the offsets
    :func:`~ptm_core.data.lines.iter_lines` does not give, with its decoding and errors."""
    if not path.is_file():
        raise DataError(path, None, "path", "file not found", "give the path of an existing file")
    with path.open("rb") as handle:
        offset = 0
        for number, raw in enumerate(handle, start=1):
            yield offset, number, decode_line(raw, path, number, DataError)
            offset += len(raw)


def _int64(values: array) -> np.ndarray:
    return np.frombuffer(values, dtype=np.int64).copy() if len(values) else np.zeros(0, np.int64)
