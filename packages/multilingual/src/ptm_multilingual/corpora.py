"""Monolingual corpora: reading and validation (see data_specs/monolingual_corpus).

The parallel-corpus reader is :mod:`ptm_core.data.parallel_corpus` (CoVe reads it too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from ptm_core.data import CorpusError
from ptm_core.data.parallel_corpus import (
    check_language_code,
    check_no_nul,
    corpus_lines,
    corpus_paths,
)


def monolingual_files(path: str | Path | Sequence[str | Path]) -> list[tuple[str, Path]]:
    """The ``(language, file)`` of every ``<lang>.txt`` under ``path``, in reading order.

    Raises:
        CorpusError: a bad file name, or no ``<lang>.txt`` file at all.
    """
    found = [(check_language_code(f.stem, f), f) for f in corpus_paths(path) if f.suffix == ".txt"]
    if not found:
        raise CorpusError(
            path, None, "path", "no <lang>.txt files found", "add files such as en.txt, fr.txt"
        )
    return found


def iter_monolingual_file(file: Path) -> Iterator[str]:
    """Stream the sentences of one ``<lang>.txt`` file (stripped; blank lines skipped).

    Raises:
        CorpusError: invalid UTF-8 or a NUL character (``file:line``), or no sentence.
    """
    empty = True
    for number, line in corpus_lines(file):
        check_no_nul(file, number, "text", line)
        if line.strip():
            empty = False
            yield line.strip()
    if empty:
        raise CorpusError(file, None, "text", "no sentences", "add one sentence per line")


def read_monolingual_corpora(path: str | Path | Sequence[str | Path]) -> dict[str, list[str]]:
    """Read ``<lang>.txt`` files: one sentence per line, blank lines skipped.

    Holds every sentence: for corpora of any size, stream them with
    :func:`monolingual_files` and :func:`iter_monolingual_file` (what
    :func:`~ptm_multilingual.prepared_data.prepare_xlm` does).

    Args:
        path: a directory of ``<lang>.txt`` files, one file, or a list of them.

    Returns:
        language -> sentences (whitespace-stripped), languages sorted by name.

    Raises:
        CorpusError: bad file name, invalid UTF-8 (``file:line``), a NUL character, or a
            language with no sentence.
    """
    corpora: dict[str, list[str]] = {}
    for lang, file in monolingual_files(path):
        corpora.setdefault(lang, []).extend(iter_monolingual_file(file))
    return dict(sorted(corpora.items()))


__all__ = ["iter_monolingual_file", "monolingual_files", "read_monolingual_corpora"]
