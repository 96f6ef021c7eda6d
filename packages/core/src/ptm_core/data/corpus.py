"""Text corpora: read and validate plain-text and JSONL corpora into documents of sentences.

Two formats (specified in ``data_specs/text_corpus/README.md``):

- ``.txt``: one sentence per line, documents separated by one or more blank lines (the
  format of Google's BERT ``create_pretraining_data.py``).
- ``.jsonl``: one JSON object per line, ``{"text": "...", "id": "..."}``; the text is split
  into sentences by :func:`split_sentences`.

Every problem raises :class:`CorpusError` naming the file, the line and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ptm_core.data.errors import DataError
from ptm_core.data.lines import iter_lines
from ptm_core.data.text_cells import check_text

TEXT_SUFFIX = ".txt"
JSONL_SUFFIX = ".jsonl"
CORPUS_SUFFIXES = (TEXT_SUFFIX, JSONL_SUFFIX)

CorpusPath = str | os.PathLike[str]

# C0 and C1 control characters; tab is ordinary text and JSONL text may hold line breaks.
_CONTROL_TXT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_JSONL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# Abbreviations that precede a name, so a capital after them starts no sentence. Words that
# often end sentences too (etc., Inc., Jr., Sr.) are left out on purpose.
ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "st", "mt", "ft", "gen", "gov", "sen", "rep", "capt"}
    | {"lt", "col", "sgt", "rev", "fr", "hon", "pres", "cf", "vs", "al", "dept", "univ"}
)
# Abbreviations that precede a number ("No. 5", "Fig. 3"); "no." before a word ends a sentence.
NUMBER_ABBREVIATIONS = frozenset(
    {"no", "nos", "fig", "figs", "vol", "vols", "pp", "eq", "eqs", "approx", "ca", "ch", "sec"}
)
# Candidate boundary: terminal punctuation, closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
_OPENERS = "\"'“‘([«"
# "U.S.", "e.g.", "i.e.", "J." (an initial): letters joined by dots.
_DOTTED = re.compile(r"^[A-Za-z](?:\.[A-Za-z])*$")
_PARAGRAPH = re.compile(r"\n[ \t\r]*\n")


class CorpusError(DataError):
    """A corpus file is missing or malformed.

    The message reads ``"<file>:<line>: <problem> (field '<field>'); <fix>"``; ``:<line>`` is
    left out for problems of a whole file or path.

    Arguments and message format: :class:`ptm_core.data.errors.DataError`.
    """


@dataclass(frozen=True)
class Document:
    """One document of a text corpus.

    Args:
        sentences: The sentences, stripped, in order (never empty).
        source: ``"<file>:<line>"`` where the document starts.
        doc_id: Unique id: the JSONL ``"id"``, else ``"<file name>#<index in file>"`` (from 0).
    """

    sentences: tuple[str, ...]
    source: str
    doc_id: str


def split_sentences(text: str) -> list[str]:
    """Split prose into sentences with a small rule-based splitter.

    A sentence ends after ``.``, ``!`` or ``?`` (plus any closing quotes or brackets) that
    is followed by whitespace and then an uppercase letter, a digit or an opening quote or
    bracket. A single ``.`` does not end a sentence after a known abbreviation
    (:data:`ABBREVIATIONS`, e.g. ``Dr.``, ``et al.``; :data:`NUMBER_ABBREVIATIONS` such as
    ``Fig.`` and ``No.`` only before a digit) or after dotted letters
    (``U.S.``, ``e.g.``, an initial such as ``J.``; the pronoun ``I`` excepted). A blank line
    always ends a sentence; other line breaks count as spaces. Whitespace inside a sentence
    is collapsed to single spaces.

    Known limits: an abbreviation or initial that really ends a sentence (``... in the
    U.S. Then``) keeps both sentences together.

    Args:
        text: The text.

    Returns:
        The non-empty sentences in order.
    """
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        for match in _BOUNDARY.finditer(paragraph):
            following = paragraph[match.end() : match.end() + 1]
            if not following or not (
                following.isupper() or following.isdigit() or following in _OPENERS
            ):
                continue
            if _is_abbreviation(paragraph[start : match.start() + 1], match.group(), following):
                continue
            sentences.append(paragraph[start : match.end()])
            start = match.end()
        sentences.append(paragraph[start:])
    return [cleaned for s in sentences if (cleaned := " ".join(s.split()))]


def _is_abbreviation(before: str, boundary: str, following: str) -> bool:
    """Whether the word ending at a single ``.`` boundary is an abbreviation, not a sentence end."""
    if not boundary.startswith(".") or boundary.startswith(".."):
        return False
    words = before.split()
    if not words:
        return False
    word = words[-1].lstrip(_OPENERS).removesuffix(".")
    if word.lower() in ABBREVIATIONS:
        return True
    if word.lower() in NUMBER_ABBREVIATIONS and following.isdigit():
        return True
    return word != "I" and bool(_DOTTED.match(word))


def corpus_files(paths: CorpusPath | Sequence[CorpusPath]) -> list[Path]:
    """Expand files, directories (their ``*.txt``/``*.jsonl``, sorted) and lists into files.

    Hidden files (name starting with ``.``) in a directory are skipped; sub-directories are
    not searched.

    Args:
        paths: A file, a directory, or a list of them.

    Returns:
        The corpus files in reading order.

    Raises:
        CorpusError: A path does not exist, has an unknown extension, or a directory holds
            no corpus file.
    """
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    if not items:
        raise CorpusError(
            "<no paths>", None, "path", "no corpus path given", "pass a file or a directory"
        )
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(
                p
                for p in path.iterdir()
                if p.is_file()
                and p.suffix.lower() in CORPUS_SUFFIXES
                and not p.name.startswith(".")
            )
            if not found:
                raise CorpusError(
                    path,
                    None,
                    "path",
                    "directory holds no .txt or .jsonl file",
                    "put corpus files in it or pass the files themselves",
                )
            files.extend(found)
        elif not path.exists():
            raise CorpusError(
                path,
                None,
                "path",
                "corpus file not found",
                "pass an existing .txt or .jsonl file, or a directory holding them",
            )
        elif path.suffix.lower() not in CORPUS_SUFFIXES:
            raise CorpusError(
                path,
                None,
                "path",
                f"unknown corpus extension {path.suffix or '(none)'!r}",
                "use .txt (one sentence per line, blank line between documents) or .jsonl "
                '(one {"text": ...} object per line)',
            )
        else:
            files.append(path)
    return files


def iter_text_corpus(paths: CorpusPath | Sequence[CorpusPath]) -> Iterator[Document]:
    """Stream the documents of a corpus, validating as it goes; see :func:`read_text_corpus`.

    Args:
        paths: A file, a directory, or a list of them.

    Yields:
        Documents in file order.

    Raises:
        CorpusError: On the first problem found.
    """
    files = corpus_files(paths)
    seen: dict[str, str] = {}
    for file in files:
        kind = "jsonl" if file.suffix.lower() == JSONL_SUFFIX else "txt"
        for document, line in parse_corpus_lines(file, _lines(file), kind):
            check_unique_id(file, document, line, seen)
            yield document
    if not seen:
        names = ", ".join(str(f) for f in files)
        raise CorpusError(
            names,
            None,
            "text",
            "corpus holds no sentences",
            'add text: one sentence per line in .txt, a non-empty "text" per line in .jsonl',
        )


def read_text_corpus(paths: CorpusPath | Sequence[CorpusPath]) -> list[Document]:
    """Read and validate a whole text corpus.

    Args:
        paths: A ``.txt`` or ``.jsonl`` file, a directory (its ``*.txt`` and ``*.jsonl``
            files in sorted order), or a list of files and directories.

    Returns:
        All documents, in file order.

    Raises:
        CorpusError: A missing path, an unknown extension, invalid UTF-8, invalid JSON, a
            JSON line that is not an object, a missing, non-string or empty ``"text"``, a
            bad or duplicate ``"id"``, a control character, or no sentences at all.
    """
    return list(iter_text_corpus(paths))


def corpus_stats(documents: Iterable[Document]) -> dict[str, int]:
    """Count documents, sentences and characters (of the sentences, separators excluded).

    Args:
        documents: The documents.

    Returns:
        ``{"documents": ..., "sentences": ..., "characters": ...}``.
    """
    stats = {"documents": 0, "sentences": 0, "characters": 0}
    for document in documents:
        stats["documents"] += 1
        stats["sentences"] += len(document.sentences)
        stats["characters"] += sum(len(s) for s in document.sentences)
    return stats


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """Decode a file line by line (on ``\\n`` only) so invalid UTF-8 names its line."""
    return iter_lines(path, CorpusError)


# Stands for a JSON key that is absent (a present key may hold null).
_MISSING = object()


def check_unique_id(path: Path, document: Document, line: int, seen: dict[str, str]) -> None:
    """Fail if ``document``'s id was seen before; else remember it.

    Args:
        path: The file ``document`` comes from.
        document: The document just read.
        line: Its line in its file.
        seen: ``doc_id -> source`` of the documents read so far (updated).

    Raises:
        CorpusError: The id is already used, naming both places.
    """
    if document.doc_id in seen:
        raise CorpusError(
            path,
            line,
            "id",
            f"document id {document.doc_id!r} already used at {seen[document.doc_id]}",
            'give each document a unique "id" (and each .txt file a unique name)',
        )
    seen[document.doc_id] = document.source


def parse_corpus_lines(
    path: Path, lines: Iterable[tuple[int, str]], kind: str, *, text_field: str = "text"
) -> Iterator[tuple[Document, int]]:
    """Validate numbered lines of a corpus file and group them into documents.

    The one place where a corpus line is checked: :func:`iter_text_corpus` feeds it a whole
    file, ``ptm prepare`` a byte range of a file or a decompressed stream. Lines may start
    anywhere in the file (their numbers say where); a ``.txt`` range must then start after
    a blank line, so that no document is cut.

    Args:
        path: The file (for messages and ``Document.source``).
        lines: ``(line number, text)`` as :func:`ptm_core.data.lines.iter_lines` yields them.
        kind: ``"txt"`` or ``"jsonl"``.
        text_field: The JSONL key holding a document's text.

    Yields:
        ``(document, line of its start)``; ids of documents without a JSONL ``"id"`` count
        from 0 at the first line given.

    Raises:
        CorpusError: On the first bad line.
    """
    if kind == "txt":
        return _txt_documents(path, lines)
    if kind == "jsonl":
        return _jsonl_documents(path, lines, text_field)
    raise ValueError(f"unknown corpus kind {kind!r}; use 'txt' or 'jsonl'")


def check_document_text(path: Path, line: int, field: str, text: object) -> str:
    """Check a document's text as the JSONL reader does: a non-empty string, no control chars.

    Args:
        path: The file, for the message.
        line: The line (or 1-based row) the text comes from.
        field: The key or column holding it.
        text: The value found there.

    Returns:
        ``text``, checked.

    Raises:
        CorpusError: ``text`` is not a string, is blank, or holds a control character.
    """
    if not isinstance(text, str):
        problem = "missing" if text is _MISSING else f"a {type(text).__name__}"
        raise CorpusError(
            path,
            line,
            field,
            f'"{field}" is {problem}, not a string',
            f'give every line a "{field}" string holding the document',
        )
    if not text.strip():
        raise CorpusError(
            path,
            line,
            field,
            f'"{field}" is empty',
            "drop the line or put the document's text in it",
        )
    _check_control(path, line, field, text, _CONTROL_JSONL)
    check_text(path, line, field, text, CorpusError)  # a lone surrogate
    return text


def _check_control(path: Path, line: int, field: str, text: str, pattern: re.Pattern[str]) -> None:
    match = pattern.search(text)
    if match:
        raise CorpusError(
            path,
            line,
            field,
            f"control character U+{ord(match.group()):04X} at character {match.start() + 1}",
            "remove it (tabs and spaces are fine; line endings must be \\n or \\r\\n)",
        )


def _txt_documents(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[Document, int]]:
    sentences: list[str] = []
    start = 0
    index = 0
    for number, text in lines:
        _check_control(path, number, "sentence", text, _CONTROL_TXT)
        sentence = text.strip()
        if sentence:
            if not sentences:
                start = number
            sentences.append(sentence)
        elif sentences:
            yield Document(tuple(sentences), f"{path}:{start}", f"{path.name}#{index}"), start
            sentences, index = [], index + 1
    if sentences:
        yield Document(tuple(sentences), f"{path}:{start}", f"{path.name}#{index}"), start


def _jsonl_documents(
    path: Path, lines: Iterable[tuple[int, str]], text_field: str
) -> Iterator[tuple[Document, int]]:
    index = 0
    for number, line in lines:
        if not line.strip():
            continue  # a trailing or separating blank line is harmless
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                path,
                number,
                "json",
                f"invalid JSON at character {exc.colno}: {exc.msg}",
                f'write one JSON object per line, e.g. {{"{text_field}": "One sentence. Another."}}',
            ) from None
        except RecursionError:
            raise CorpusError(
                path,
                number,
                "json",
                "JSON nested too deeply to read",
                f'write one flat object per line, e.g. {{"{text_field}": "One sentence."}}',
            ) from None
        if not isinstance(record, dict):
            raise CorpusError(
                path,
                number,
                "json",
                f"expected a JSON object, got {type(record).__name__}",
                f'write one object per line, e.g. {{"{text_field}": "One sentence. Another."}}',
            )
        text = check_document_text(path, number, text_field, record.get(text_field, _MISSING))
        doc_id = record.get("id", f"{path.name}#{index}")
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or doc_id == "":
            raise CorpusError(
                path,
                number,
                "id",
                f'"id" is {doc_id!r}, not a non-empty string or integer',
                'use a string id such as "doc-17", or leave "id" out',
            )
        yield Document(tuple(split_sentences(text)), f"{path}:{number}", str(doc_id)), number
        index += 1
