"""Word-level training data for ELMo's biLM: a memory-mapped corpus of word ids.

The corpus is read through the same inputs as ``ptm prepare``
(:mod:`ptm_core.data.sources`: ``.txt``/``.jsonl``, compressed or not, Arrow, Parquet), one
document at a time, twice: the first pass counts word types, the second writes every
sentence's word ids (into the table of all types, by decreasing frequency) to a flat
``int32`` file with row offsets beside it (Megatron's ``.bin``/``.idx`` idea). Nothing
holds the corpus in memory; the type table is vocabulary-sized.

A batch reads its rows from the memory map and makes both model inputs from the types:
the character ids of every word (any string: the char CNN reads bytes) and the output id
of every word (the ``top_k`` most frequent types after ``<unk>``, ``<s>``, ``</s>``; the
rest are ``<unk>``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptm_classic.recurrent.bilm import SPECIAL_WORDS, UNK_ID
from ptm_classic.recurrent.char_cnn import MAX_CHARACTERS, characters_to_ids
from ptm_core.atomic import atomic_directory
from ptm_core.data.batches import Batch, EpochBatches
from ptm_core.data.shuffle import EpochOrder
from ptm_core.data.sources import find_inputs, iter_piece_documents, scan_input

WORD_CORPUS_FORMAT = "ptm-word-corpus/1"
_WORD = re.compile(r"\w+(?:[-'’.]\w+)*|[^\w\s]", re.UNICODE)
_WHOLE_FILE = 2**62  # one piece per file: the two passes read each file front to back


def split_words(sentence: str, *, lowercase: bool = False) -> list[str]:
    """Words and punctuation marks of a sentence (``"Curie's"``, ``"1867"``, ``","``)."""
    return _WORD.findall(sentence.lower() if lowercase else sentence)


def iter_corpus_sentences(corpus: str | Path | Sequence[str | Path]) -> Iterator[str]:
    """Stream the sentences of a corpus as ``ptm prepare`` reads it, validating as it goes."""
    for file in find_inputs(corpus):
        for piece in scan_input(file, _WHOLE_FILE).pieces:
            for document in iter_piece_documents(piece):
                yield from document


def _fingerprint(corpus: str | Path | Sequence[str | Path], settings: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for file in find_inputs(corpus):
        stat = file.path.stat()
        digest.update(f"{file.path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


class WordCorpus:
    """A prepared word corpus: rows of word-type ids, memory-mapped.

    Args:
        directory: a folder written by :func:`prepare_word_corpus`.
    """

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.manifest = json.loads((self.directory / "manifest.json").read_text("utf-8"))
        self.types = (self.directory / "types.txt").read_text("utf-8").split("\n")[:-1]
        self.counts = np.load(self.directory / "counts.npy")
        self.offsets = np.load(self.directory / "rows.npy", mmap_mode="r")
        words = self.directory / "words.bin"
        self.words = (
            np.memmap(words, dtype=np.int32, mode="r")
            if words.stat().st_size
            else np.zeros(0, np.int32)
        )

    @property
    def num_rows(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_words(self) -> int:
        return int(self.offsets[-1])

    def row(self, index: int) -> np.ndarray:
        """Word-type ids of row ``index``."""
        return np.asarray(self.words[int(self.offsets[index]) : int(self.offsets[index + 1])])

    def vocabulary(self, top_k: int, min_count: int = 1) -> list[str]:
        """Output words: the specials, then up to ``top_k`` types seen ``>= min_count`` times."""
        kept = int(min(top_k, int((self.counts >= min_count).sum())))
        return [*SPECIAL_WORDS, *self.types[:kept]]


def prepare_word_corpus(
    corpus: str | Path | Sequence[str | Path],
    directory: str | Path,
    *,
    max_length: int = 64,
    lowercase: bool = False,
) -> WordCorpus:
    """Write (or reuse) a prepared word corpus of ``corpus`` in ``directory``.

    Sentences longer than ``max_length`` words become several rows. A folder prepared from
    the same files (paths, sizes, modification times) and settings is reused as is.

    Args:
        corpus: text-corpus file(s) or folder (see ``data_specs/text_corpus``).
        directory: where to write (replaced atomically).
        max_length: words per row at most.
        lowercase: lower-case the words.

    Returns:
        The :class:`WordCorpus`.

    Raises:
        CorpusError: a file that cannot be read or validated, naming the file and line.
        ValueError: a corpus without words.
    """
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    directory = Path(directory)
    settings = {"format": WORD_CORPUS_FORMAT, "max_length": max_length, "lowercase": lowercase}
    fingerprint = _fingerprint(corpus, settings)
    manifest = directory / "manifest.json"
    if manifest.is_file():
        try:
            if json.loads(manifest.read_text("utf-8")).get("fingerprint") == fingerprint:
                return WordCorpus(directory)
        except (OSError, ValueError):
            pass  # a damaged folder is written again
    counts: Counter[str] = Counter()
    for sentence in iter_corpus_sentences(corpus):
        counts.update(split_words(sentence, lowercase=lowercase))
    if not counts:
        raise ValueError(f"{corpus}: the corpus holds no words; add text to it")
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    type_ids = {word: index for index, (word, _) in enumerate(ranked)}
    offsets = array("q", [0])
    with atomic_directory(directory) as tmp:
        with (tmp / "words.bin").open("wb") as out:
            for sentence in iter_corpus_sentences(corpus):
                ids = [type_ids[w] for w in split_words(sentence, lowercase=lowercase)]
                for start in range(0, len(ids), max_length):
                    chunk = ids[start : start + max_length]
                    out.write(np.asarray(chunk, dtype=np.int32).tobytes())
                    offsets.append(offsets[-1] + len(chunk))
        np.save(tmp / "rows.npy", np.frombuffer(offsets, dtype=np.int64))
        np.save(tmp / "counts.npy", np.asarray([c for _, c in ranked], dtype=np.int64))
        (tmp / "types.txt").write_text("".join(f"{w}\n" for w, _ in ranked), encoding="utf-8")
        (tmp / "manifest.json").write_text(
            json.dumps(
                {
                    **settings,
                    "fingerprint": fingerprint,
                    "num_rows": len(offsets) - 1,
                    "num_words": offsets[-1],
                    "num_types": len(ranked),
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return WordCorpus(directory)


class RowSubset(Sequence[int]):
    """Row indices ``i`` of a corpus with ``(i % every == 0) == held_out`` (a held-out split
    that needs no list of indices)."""

    def __init__(self, num_rows: int, every: int, *, held_out: bool) -> None:
        self.every = every
        self.held_out = held_out
        held = (num_rows + every - 1) // every if every > 0 else 0
        self._len = held if held_out else num_rows - held

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        if not 0 <= index < self._len:
            raise IndexError(index)
        if self.every <= 0:
            return index
        if self.held_out:
            return index * self.every
        per = self.every - 1
        return (index // per) * self.every + index % per + 1


class ElmoBatches(EpochBatches):
    """Deterministic, resumable biLM batches: ``char_ids``, ``attention_mask``,
    ``word_targets`` (see :class:`~ptm_classic.recurrent.bilm.BiLMTraining`).

    Args:
        corpus: the prepared word corpus.
        rows: which rows to batch (default all).
        vocab_size: output words (specials + top types); types beyond are ``<unk>``.
        batch_size: rows per batch.
        max_characters: characters per word (ELMo: 50).
        seed: shuffling seed.
        shuffle: shuffle each epoch (False for evaluation).
        num_workers: worker processes building batches.
    """

    empty_message = "no rows to batch: the word corpus is empty"

    def __init__(
        self,
        corpus: WordCorpus,
        vocab_size: int,
        batch_size: int,
        *,
        rows: Sequence[int] | None = None,
        max_characters: int = MAX_CHARACTERS,
        seed: int = 0,
        shuffle: bool = True,
        num_workers: int = 0,
    ) -> None:
        super().__init__(
            rows if rows is not None else range(corpus.num_rows),
            batch_size,
            seed=seed,
            shuffle=shuffle,
            num_workers=num_workers,
            pin_memory=torch.cuda.is_available(),
        )
        self.corpus = corpus
        self.num_words = vocab_size - len(SPECIAL_WORDS)
        self.max_characters = max_characters

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        rows = [self.corpus.row(self.examples[i]) for i in self.indices(epoch, index, order)]
        sentences = [[self.corpus.types[t] for t in row] for row in rows]
        length = max(len(r) for r in rows)
        targets = torch.full((len(rows), length), UNK_ID, dtype=torch.long)
        mask = torch.zeros(len(rows), length, dtype=torch.bool)
        for b, row in enumerate(rows):
            ids = torch.from_numpy(row.astype(np.int64))
            targets[b, : len(row)] = torch.where(
                ids < self.num_words, ids + len(SPECIAL_WORDS), UNK_ID
            )
            mask[b, : len(row)] = True
        return {
            "char_ids": characters_to_ids(sentences, self.max_characters),
            "attention_mask": mask,
            "word_targets": targets,
        }


def default_word_corpus_dir(output_dir: str | Path) -> Path:
    """Where a run keeps its prepared word corpus: ``<output_dir>/word_corpus``."""
    return Path(os.fspath(output_dir)) / "word_corpus"


__all__ = [
    "WORD_CORPUS_FORMAT",
    "ElmoBatches",
    "RowSubset",
    "WordCorpus",
    "default_word_corpus_dir",
    "iter_corpus_sentences",
    "prepare_word_corpus",
    "split_words",
]
