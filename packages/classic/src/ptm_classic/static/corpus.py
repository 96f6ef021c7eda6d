"""Word streams for static embeddings: restartable, never the whole corpus in memory.

:class:`SentenceCorpus` is an iterable that yields one sentence at a time as a list of
words and starts again from the top at every ``iter()`` (gensim's ``Word2Vec`` walks it
once to build its vocabulary and once per epoch). It reads either raw text-corpus files
through the same readers and validation as ``ptm prepare``
(:mod:`ptm_core.data.sources`: ``.txt``/``.jsonl``, compressed or not, Arrow, Parquet), or a
prepared corpus (``ptm prepare`` output), whose WordPiece ids are turned back into words.

:func:`encode_corpus` writes a corpus as a flat memory-mapped ``int32`` file of vocabulary
ids with sentence offsets beside it (Megatron's ``.bin``/``.idx`` idea), from which NNLM's
n-gram windows are cut lazily.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptm_core.atomic import atomic_directory

_WORD = re.compile(r"\w+(?:[-'’.]\w+)*|[^\w\s]", re.UNICODE)
_WHOLE_FILE = 2**62  # one piece per file: each file is read front to back
Sentences = Iterable[Sequence[str]]


def split_words(sentence: str, *, lowercase: bool = True) -> list[str]:
    """Words and punctuation marks of a sentence (``"Curie's"``, ``"1867"``, ``","``)."""
    return _WORD.findall(sentence.lower() if lowercase else sentence)


class SentenceCorpus:
    """A restartable stream of sentences as word lists, read from disk on every pass.

    Args:
        corpus: text-corpus file(s), folder(s) or glob pattern(s) (``data_specs/text_corpus``);
            ignored when ``prepared`` is given.
        prepared: a directory written by ``ptm prepare``: its token ids are decoded with its
            tokenizer and WordPiece continuations (``##``) are joined back into words.
        lowercase: lower-case the words (raw text only; a prepared corpus keeps its
            tokenizer's casing).
        max_sentence_length: longer sentences are cut into pieces of this many words.
        text_field: the JSONL key or Arrow/Parquet column holding the text.

    Raises:
        ValueError: neither ``corpus`` nor ``prepared`` is given.
    """

    def __init__(
        self,
        corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        *,
        prepared: str | os.PathLike[str] | None = None,
        lowercase: bool = True,
        max_sentence_length: int = 10_000,
        text_field: str = "text",
    ) -> None:
        if corpus is None and prepared is None:
            raise ValueError("give a corpus (data.corpus) or a prepared directory (data.prepared)")
        if max_sentence_length < 1:
            raise ValueError(f"max_sentence_length must be >= 1, got {max_sentence_length}")
        self.corpus = corpus
        self.prepared = Path(prepared) if prepared is not None else None
        self.lowercase = lowercase
        self.max_sentence_length = max_sentence_length
        self.text_field = text_field

    def __iter__(self) -> Iterator[list[str]]:
        texts = self._prepared_words() if self.prepared is not None else self._raw_words()
        size = self.max_sentence_length
        for words in texts:
            for start in range(0, len(words), size):
                yield words[start : start + size]

    def _raw_words(self) -> Iterator[list[str]]:
        from ptm_core.data.sources import find_inputs, iter_piece_documents, scan_input

        assert self.corpus is not None
        for file in find_inputs(self.corpus):
            for piece in scan_input(file, _WHOLE_FILE, self.text_field).pieces:
                for document in iter_piece_documents(piece, self.text_field):
                    for sentence in document:
                        words = split_words(sentence, lowercase=self.lowercase)
                        if words:
                            yield words

    def _prepared_words(self) -> Iterator[list[str]]:
        from ptm_core.data.prepared import PreparedCorpus
        from ptm_core.tokenization import WordPieceTokenizer

        assert self.prepared is not None
        store = PreparedCorpus.open(self.prepared, verify=False)
        tokenizer = WordPieceTokenizer.from_directory(store.tokenizer_dir)
        for document in range(store.num_documents):
            bounds = store.sentence_offsets(document)
            for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
                pieces = tokenizer.convert_ids_to_tokens(store.tokens(start, stop).tolist())
                words = join_word_pieces(pieces)
                if words:
                    yield words

    def fingerprint(self) -> str:
        """A key that changes when the inputs or the reading settings change (file paths,
        sizes and modification times; a prepared corpus's own fingerprint)."""
        digest = hashlib.sha256(
            json.dumps(
                {
                    "lowercase": self.lowercase,
                    "max_sentence_length": self.max_sentence_length,
                    "text_field": self.text_field,
                },
                sort_keys=True,
            ).encode()
        )
        if self.prepared is not None:
            from ptm_core.data.prepared import read_manifest

            digest.update(f"prepared\0{read_manifest(self.prepared)['fingerprint']}".encode())
        else:
            from ptm_core.data.sources import find_inputs

            assert self.corpus is not None
            for file in find_inputs(self.corpus):
                stat = file.path.stat()
                digest.update(f"{file.path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()

    def __repr__(self) -> str:
        source = f"prepared={str(self.prepared)!r}" if self.prepared else f"corpus={self.corpus!r}"
        return f"SentenceCorpus({source}, lowercase={self.lowercase})"


def join_word_pieces(pieces: Sequence[str]) -> list[str]:
    """WordPiece tokens back into words: ``["play", "##ing", "."]`` -> ``["playing", "."]``;
    special tokens (``[CLS]``, ``[SEP]``, ...) are dropped."""
    words: list[str] = []
    for piece in pieces:
        if piece.startswith("[") and piece.endswith("]") and len(piece) > 2:
            continue
        if piece.startswith("##") and words:
            words[-1] += piece[2:]
        else:
            words.append(piece)
    return words


def corpus_fingerprint(sentences: Sentences) -> str | None:
    """The stream's ``fingerprint()`` when it has one (a :class:`SentenceCorpus`), else None."""
    method = getattr(sentences, "fingerprint", None)
    return str(method()) if callable(method) else None


@dataclass
class Vocabulary:
    """Word types by decreasing frequency (ties in alphabetical order).

    Attributes:
        words: the kept types, most frequent first.
        counts: their corpus counts, aligned with ``words``.
        total_words: all word tokens of the corpus (kept or not).
    """

    words: list[str]
    counts: list[int]
    total_words: int

    def __post_init__(self) -> None:
        self.ids = {word: index for index, word in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)


def build_vocabulary(
    sentences: Sentences, *, min_count: int = 1, max_size: int | None = None
) -> Vocabulary:
    """Count the words of one pass over ``sentences`` (the memory is vocabulary-sized).

    Args:
        sentences: a restartable stream of word lists.
        min_count: drop types seen fewer times.
        max_size: keep at most this many types (the most frequent).

    Returns:
        The :class:`Vocabulary`.

    Raises:
        ValueError: no word is seen ``min_count`` times.
    """
    counts: Counter[str] = Counter()
    for sentence in sentences:
        counts.update(sentence)
    ranked = sorted(
        ((w, c) for w, c in counts.items() if c >= min_count), key=lambda item: (-item[1], item[0])
    )
    if max_size is not None:
        ranked = ranked[:max_size]
    if not ranked:
        raise ValueError(
            f"no word occurs at least min_count={min_count} times in {sentences!r} "
            f"({sum(counts.values())} words, {len(counts)} types); lower min_count or give a "
            "larger corpus"
        )
    return Vocabulary([w for w, _ in ranked], [c for _, c in ranked], sum(counts.values()))


class EncodedCorpus:
    """A corpus as vocabulary ids, memory-mapped: ``words.bin`` (``int32``) + ``rows.npy``.

    Args:
        directory: a folder written by :func:`encode_corpus`.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.manifest = json.loads((self.directory / "manifest.json").read_text("utf-8"))
        self.offsets = np.load(self.directory / "rows.npy", mmap_mode="r")
        words = self.directory / "words.bin"
        self.words = (
            np.memmap(words, dtype=np.int32, mode="r")
            if words.stat().st_size
            else np.zeros(0, np.int32)
        )

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_words(self) -> int:
        return int(self.offsets[-1])


def encode_corpus(
    sentences: Sentences, ids: dict[str, int], unk_id: int, directory: str | os.PathLike[str]
) -> EncodedCorpus:
    """Write every sentence's ids (``unk_id`` for a word outside ``ids``) to ``directory``.

    A folder written from the same stream fingerprint and vocabulary is reused as is.

    Args:
        sentences: a restartable stream of word lists.
        ids: word -> id.
        unk_id: the id of words outside ``ids``.
        directory: where to write (replaced atomically).

    Returns:
        The :class:`EncodedCorpus`.
    """
    directory = Path(directory)
    digest = hashlib.sha256(f"{unk_id}\0".encode())
    for word, index in sorted(ids.items(), key=lambda item: item[1]):
        digest.update(f"{index}\0{word}\n".encode())
    key = f"{corpus_fingerprint(sentences)}-{digest.hexdigest()}"
    manifest = directory / "manifest.json"
    if corpus_fingerprint(sentences) is not None and manifest.is_file():
        try:
            if json.loads(manifest.read_text("utf-8")).get("key") == key:
                return EncodedCorpus(directory)
        except (OSError, ValueError):
            pass  # a damaged folder is written again
    offsets = array("q", [0])
    with atomic_directory(directory) as tmp:
        with (tmp / "words.bin").open("wb") as out:
            for sentence in sentences:
                row = np.fromiter((ids.get(w, unk_id) for w in sentence), np.int32, len(sentence))
                out.write(row.tobytes())
                offsets.append(offsets[-1] + len(row))
        np.save(tmp / "rows.npy", np.frombuffer(offsets, dtype=np.int64))
        (tmp / "manifest.json").write_text(
            json.dumps({"key": key, "sentences": len(offsets) - 1, "words": offsets[-1]}) + "\n",
            encoding="utf-8",
        )
    return EncodedCorpus(directory)


__all__ = [
    "EncodedCorpus",
    "SentenceCorpus",
    "Vocabulary",
    "build_vocabulary",
    "corpus_fingerprint",
    "encode_corpus",
    "join_word_pieces",
    "split_words",
]
