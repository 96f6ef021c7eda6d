"""Domain words of a corpus that a tokenizer splits into several pieces.

A *word* is what the tokenizer's own normalizer and pre-tokenizer make of the text, so the
words found are exactly the units the tokenizer would later look up whole:

- WordPiece (BERT): the text normalised (lower-cased, accents stripped where the model
  does), then split on white space and punctuation (``BertPreTokenizer``): ``acetyl-CoA``
  gives ``acetyl``, ``-``, ``coa``;
- byte-level BPE (RoBERTa, GPT-2): the GPT-2 pattern: runs of letters, runs of digits, runs
  of other symbols, each with the space before it (which is dropped here);
- Unigram/SentencePiece (XLM-R): the normalised text split on spaces (``▁`` dropped).

A word counts as a candidate when it has at least two characters and a letter (numbers and
punctuation runs are not words worth a row), occurs at least ``min_count`` times, and the
tokenizer splits it, as it appears after a space, into two or more pieces none of which is
the unknown token (a row built from ``[UNK]`` would say nothing of the word). Candidates are
ranked by count (ties by the word, so the choice is deterministic).

The corpus is read as a stream (the formats of ``ptm prepare``: ``.txt``/``.jsonl``, their
``.gz``/``.zst`` forms, Arrow and Parquet), in chunks of about 1 MiB of sentences; only the
counts of the distinct white-space-separated tokens are kept, and each distinct token is
normalised and pre-tokenized once (every supported pre-tokenizer splits at white space).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from ptm_core.data.sources import InputFile, Piece, find_inputs, iter_piece_documents, scan_input
from ptm_core.progress import Progress

_CHUNK_CHARS = 1 << 20
# The space markers of byte-level BPE and SentencePiece are not part of a word.
_STRIP = " \t\r\n\u2581"


@dataclass(frozen=True)
class WordCounts:
    """How often each word occurs in a corpus, and how much text was read.

    Args:
        counts: word -> occurrences.
        files: the corpus files read, in order.
        characters: characters of sentence text read.
    """

    counts: Counter[str]
    files: tuple[Path, ...]
    characters: int


@dataclass(frozen=True)
class DomainWord:
    """A word to add, with the pieces the tokenizer gave it before.

    Args:
        word: the word, as the normalizer leaves it (lower-cased for uncased models).
        count: occurrences in the corpus.
        pieces: ids the old tokenizer gives the word after a space, in order.
    """

    word: str
    count: int
    pieces: tuple[int, ...]


def count_words(
    corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    backend: Tokenizer,
    *,
    text_field: str = "text",
) -> WordCounts:
    """Count the words of ``corpus`` as ``backend`` normalises and pre-tokenizes them.

    Args:
        corpus: files, folders or glob patterns (the inputs of ``ptm prepare``).
        backend: the tokenizer whose normalizer and pre-tokenizer define a word.
        text_field: the JSONL key or Arrow/Parquet column that holds the text.

    Returns:
        The counts.

    Raises:
        CorpusError: a missing path, an unknown suffix or a bad line (named with its line).
    """
    files = find_inputs(corpus)
    sizes = [file.path.stat().st_size for file in files]
    # Compressed sizes are not text sizes: no total (and no ETA) then.
    plain = all(file.compression is None and file.kind in ("txt", "jsonl") for file in files)
    # White-space tokens are counted at C speed; each distinct one then goes through the
    # normalizer and the pre-tokenizer once. Every supported pre-tokenizer splits at white
    # space, so a word's count is the sum over the tokens that hold it.
    spans: Counter[str] = Counter()
    characters = 0
    with Progress("count words", sum(sizes) if plain else None, "byte") as progress:
        for chunk in _chunks(files, sizes, text_field):
            spans.update(chunk.split())
            characters += len(chunk)
            progress.update(len(chunk.encode("utf-8")))
    counts: Counter[str] = Counter()
    for span, count in spans.items():
        for word in _words(backend, span):
            counts[word] += count
    return WordCounts(counts, tuple(file.path for file in files), characters)


def find_domain_words(
    counts: WordCounts,
    backend: Tokenizer,
    *,
    max_new: int,
    min_count: int,
    unk_id: int | None,
) -> list[DomainWord]:
    """The ``max_new`` most frequent candidate words (see the module docstring).

    Args:
        counts: from :func:`count_words` with the same ``backend``.
        backend: the tokenizer to extend.
        max_new: most words returned.
        min_count: fewest occurrences of a word returned.
        unk_id: the unknown token's id (words with it in their pieces are skipped).

    Returns:
        The words, most frequent first.
    """
    ranked = sorted(
        (
            (word, count)
            for word, count in counts.counts.items()
            if count >= min_count and len(word) > 1 and any(c.isalpha() for c in word)
        ),
        key=lambda item: (-item[1], item[0]),
    )
    found: list[DomainWord] = []
    batch = max(256, 2 * max_new)
    for start in range(0, len(ranked), batch):
        part = ranked[start : start + batch]
        encodings = backend.encode_batch_fast(
            [" " + word for word, _ in part], add_special_tokens=False
        )
        for (word, count), encoding in zip(part, encodings, strict=True):
            ids = tuple(encoding.ids)
            if len(ids) > 1 and (unk_id is None or unk_id not in ids):
                found.append(DomainWord(word, count, ids))
                if len(found) == max_new:
                    return found
    return found


def _chunks(files: Sequence[InputFile], sizes: Sequence[int], text_field: str) -> Iterator[str]:
    """The corpus's sentences joined by line breaks, about 1 MiB of characters at a time."""
    parts: list[str] = []
    held = 0
    for file, size in zip(files, sizes, strict=True):
        for piece in _pieces(file, size, text_field):
            for document in iter_piece_documents(piece, text_field):
                for sentence in document:
                    parts.append(sentence)
                    held += len(sentence) + 1
                    if held >= _CHUNK_CHARS:
                        yield "\n".join(parts)
                        parts, held = [], 0
    if parts:
        yield "\n".join(parts)


def _pieces(file: InputFile, size: int, text_field: str) -> Sequence[Piece]:
    if file.kind in ("arrow", "parquet"):
        return scan_input(file, 1 << 62, text_field).pieces
    unit = "bytes" if file.compression is None else "file"
    return [Piece(str(file.path), file.kind, file.compression, unit, 0, size, 0)]


def _words(backend: Tokenizer, text: str) -> Iterator[str]:
    """The words of ``text`` through the backend's normalizer and pre-tokenizer."""
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    if backend.pre_tokenizer is None:
        yield from (word for word in text.split() if word)
        return
    for _, (start, end) in backend.pre_tokenizer.pre_tokenize_str(text):
        word = text[start:end].strip(_STRIP)
        if word:
            yield word
