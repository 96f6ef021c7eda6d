"""XLM's corpora prepared once: per-language token streams and aligned parallel pairs.

:func:`prepare_xlm` reads the monolingual ``<lang>.txt`` files and the parallel corpora as
streams (never a list of every sentence), trains the shared BPE vocabulary on a
language-smoothed sample of them (or takes a given one), and writes memory-mapped token
shards into a cache folder keyed by a fingerprint of the inputs' contents, the tokenizer
and the settings. A second run finds the folder and reads it as it is.

Layout (format ``ptm-xlm-prepared/1``)::

    <dir>/manifest.json        written last, atomically: inputs, tokenizer, streams, corpora
    <dir>/tokenizer/           SharedBPETokenizer.save: the ids' vocabulary and languages
    <dir>/mono/<lang>/         one language's MLM stream: a ``ptm-prepared/1`` store whose
                               sentences each end with ``</s>`` (one document per shard),
                               so the stream is the concatenation of its shards' tokens
    <dir>/parallel/<k>-<src>-<tgt>/source/   pair i's source side = document i (ends with </s>)
    <dir>/parallel/<k>-<src>-<tgt>/target/   pair i's target side = document i

Each store is a folder in core's ``ptm-prepared/1`` format (:mod:`ptm_core.data.prepared`):
token shards in ``uint16`` (``uint32`` past 65,536 ids), sentence and document offsets,
and a manifest with the SHA-256 of every shard file, so :class:`PreparedCorpus` reads it
and :func:`~ptm_core.data.prepared.verify_shards` checks it. A store folder is built under
a temporary name and renamed when complete, so an interrupted run keeps the finished
stores and builds only the others. The two sides of a parallel corpus are cut into shards
at the same pairs.

The language order of the MLM streams and the TLM corpora, and the sentence order inside
each, are those of the in-memory builders (:func:`read_monolingual_corpora` and
:func:`read_parallel_corpora` into :func:`build_mlm_streams` and :func:`build_tlm_examples`,
XLM's data path before this module), so the batches of a seed are the same on both
(tests/multilingual/test_xlm_prepared.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from ptm_core.atomic import atomic_directory, atomic_write_text
from ptm_core.data.parallel_corpus import ParallelSource, parallel_sources
from ptm_core.data.prepared import (
    FORMAT as STORE_FORMAT,
)
from ptm_core.data.prepared import (
    MANIFEST,
    SHARDS_DIR,
    shard_file,
    token_dtype,
)
from ptm_core.data.shard_writer import tokenizer_sha256
from ptm_core.data.sources import file_sha256
from ptm_core.pretraining import default_cache_dir
from ptm_multilingual.corpora import iter_monolingual_file, monolingual_files
from ptm_multilingual.tokenizer import SharedBPETokenizer

logger = logging.getLogger(__name__)

FORMAT = "ptm-xlm-prepared/1"
TOKENIZER_DIR = "tokenizer"
#: Tokens per shard file (16 MiB of uint16): memory while writing is bounded by it.
DEFAULT_SHARD_TOKENS = 8 * 2**20
#: Sentences per shard at most (bounds the offsets held while a shard is written).
SHARD_SENTENCES = 2**20
#: Sentences tokenized per call of the fast tokenizer.
BATCH_SENTENCES = 4096
SIDES = ("source", "target")

Paths = str | Path | Sequence[str | Path]


@dataclass(frozen=True)
class XLMInputs:
    """The corpora of an XLM run, found on disk but not read.

    Attributes:
        monolingual: ``(language, <lang>.txt file)`` in reading order.
        parallel: the parallel corpora in reading order.
    """

    monolingual: tuple[tuple[str, Path], ...]
    parallel: tuple[ParallelSource, ...]

    @classmethod
    def find(cls, monolingual: Paths | None, parallel: Paths | None) -> XLMInputs:
        """Find the files (names checked; contents read later, as streams)."""
        if monolingual is None and parallel is None:
            raise ValueError("give monolingual corpora, parallel corpora, or both")
        mono = monolingual_files(monolingual) if monolingual is not None else []
        par = parallel_sources(parallel) if parallel is not None else []
        return cls(tuple(mono), tuple(par))

    def text_streams(self) -> dict[str, list[Callable[[], Iterator[str]]]]:
        """Language -> openers of its sentences: monolingual files (languages sorted), then
        the sides of the parallel corpora (the order the BPE sample draws from)."""
        streams: dict[str, list[Callable[[], Iterator[str]]]] = {}
        for lang, file in sorted(self.monolingual, key=lambda item: item[0]):
            streams.setdefault(lang, []).append(functools.partial(iter_monolingual_file, file))
        for corpus in self.parallel:
            for side, lang in enumerate((corpus.source_lang, corpus.target_lang)):
                streams.setdefault(lang, []).append(functools.partial(_side, corpus, side))
        return streams

    def mlm_streams(self) -> dict[str, list[Callable[[], Iterator[str]]]]:
        """Language -> openers of its MLM stream: the monolingual text, or (with none) the
        parallel sides: XLM's MLM data when there is no monolingual corpus."""
        streams = self.text_streams()
        if self.monolingual:
            langs = {lang for lang, _ in self.monolingual}
            return {
                lang: s[: self._mono_files(lang)] for lang, s in streams.items() if lang in langs
            }
        return streams

    def _mono_files(self, lang: str) -> int:
        return sum(1 for code, _ in self.monolingual if code == lang)

    def identity(self) -> list[dict[str, Any]]:
        """Role, language(s), name and SHA-256 of each input (what the ids depend on)."""
        out: list[dict[str, Any]] = [
            {"role": "monolingual", "lang": lang, "path": str(f), "sha256": file_sha256(f)}
            for lang, f in self.monolingual
        ]
        for corpus in self.parallel:
            out.append(
                {
                    "role": "parallel",
                    "langs": [corpus.source_lang, corpus.target_lang],
                    "paths": [str(f) for f in corpus.files],
                    "sha256": [file_sha256(f) for f in corpus.files],
                }
            )
        return out


def _side(corpus: ParallelSource, side: int) -> Iterator[str]:
    for pair in corpus.iter_pairs():
        yield pair[side]


def _chain(openers: Iterable[Callable[[], Iterable[str]]]) -> Iterator[str]:
    for opener in openers:
        yield from opener()


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _content_only(identity: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The identity without paths: a moved copy of the same files hits the same cache."""
    return [{k: v for k, v in item.items() if k not in ("path", "paths")} for item in identity]


# ---------------------------------------------------------------------- tokenizer


def ready_xlm_tokenizer(
    inputs: XLMInputs,
    identity: list[dict[str, Any]],
    cache_root: Path,
    *,
    tokenizer: str | Path | None,
    vocab_size: int,
    vocab_alpha: float,
    lowercase: bool,
    sample_size: int | None,
    seed: int,
) -> SharedBPETokenizer:
    """The given shared tokenizer, or one trained once and kept in the cache.

    A trained tokenizer is cached under a key of the inputs' contents and the training
    settings; the corpora are read twice to train it, as streams: a count of each
    language's sentences (which also validates every line), then the sentences the
    smoothed sample drew (:meth:`SharedBPETokenizer.train_from_streams`).
    """
    if tokenizer is not None:
        return SharedBPETokenizer.from_directory(tokenizer)
    settings = {
        "vocab_size": vocab_size,
        "vocab_alpha": vocab_alpha,
        "lowercase": lowercase,
        "sample_size": sample_size,
        "seed": seed,
    }
    key = _digest({"format": FORMAT, "inputs": _content_only(identity), "train": settings})
    folder = cache_root / "xlm-tokenizers" / key[:20]
    if (folder / "languages.json").is_file():
        return SharedBPETokenizer.from_directory(folder)
    streams = inputs.text_streams()
    counts = {lang: sum(1 for _ in _chain(openers)) for lang, openers in streams.items()}
    logger.info("training a shared BPE vocabulary of %d on %s sentences", vocab_size, counts)
    trained = SharedBPETokenizer.train_from_streams(
        {lang: functools.partial(_chain, openers) for lang, openers in streams.items()},
        counts,
        vocab_size=vocab_size,
        alpha=vocab_alpha,
        sample_size=sample_size,
        lowercase=lowercase,
        seed=seed,
    )
    with atomic_directory(folder) as tmp:
        trained.save(tmp)
    return SharedBPETokenizer.from_directory(folder)


# ---------------------------------------------------------------------- writing


class _ShardedStoreWriter:
    """Appends sentences of token ids to one ``ptm-prepared/1`` store, shard by shard.

    Args:
        root: the store folder (a temporary one, renamed by the caller).
        dtype: token dtype.
        document_per_sentence: each sentence is a document (parallel sides); else each
            shard is one document (a stream).
    """

    def __init__(self, root: Path, dtype: np.dtype, *, document_per_sentence: bool) -> None:
        self.root = root
        self.dtype = dtype
        self.document_per_sentence = document_per_sentence
        (root / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
        self.shards: list[dict[str, Any]] = []
        self._handle: IO[bytes] | None = None
        self._lengths = array("q")
        self._tokens = 0

    @property
    def shard_tokens(self) -> int:
        return self._tokens

    @property
    def shard_sentences(self) -> int:
        return len(self._lengths)

    def add(self, sentences: Sequence[Sequence[int]]) -> None:
        if self._handle is None:
            name = f"{len(self.shards):05d}"
            self._handle = open(shard_file(self.root, name, "tokens"), "wb")  # noqa: SIM115
        lengths = [len(ids) for ids in sentences]
        flat = np.fromiter(
            (t for ids in sentences for t in ids), dtype=self.dtype, count=sum(lengths)
        )
        self._handle.write(flat.tobytes())
        self._lengths.extend(lengths)
        self._tokens += len(flat)

    def cut(self) -> None:
        """Finish the current shard (nothing when it is empty)."""
        if self._handle is None:
            return
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        self._handle = None
        name = f"{len(self.shards):05d}"
        count = len(self._lengths)
        sentences = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(self._lengths, dtype=np.int64), out=sentences[1:])
        documents = (
            np.arange(count + 1, dtype=np.int64)
            if self.document_per_sentence
            else np.asarray([0, count], dtype=np.int64)
        )
        np.save(shard_file(self.root, name, "sentences.npy"), sentences)
        np.save(shard_file(self.root, name, "documents.npy"), documents)
        self.shards.append(
            {
                "name": name,
                "documents": len(documents) - 1,
                "sentences": count,
                "tokens": self._tokens,
                "sha256": {
                    kind: file_sha256(shard_file(self.root, name, kind))
                    for kind in ("tokens", "sentences.npy", "documents.npy")
                },
            }
        )
        self._lengths = array("q")
        self._tokens = 0

    def finish(self, fingerprint: str) -> dict[str, Any]:
        """Cut the last shard and write the store's manifest; returns its totals."""
        self.cut()
        totals = {
            key: sum(int(s[key]) for s in self.shards)
            for key in ("documents", "sentences", "tokens")
        }
        manifest = {
            "format": STORE_FORMAT,
            "fingerprint": fingerprint,
            "dtype": self.dtype.name,
            "shards": self.shards,
            "totals": {"shards": len(self.shards), **totals},
        }
        atomic_write_text(self.root / MANIFEST, json.dumps(manifest, indent=1) + "\n")
        return totals


def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _encode(tok: SharedBPETokenizer, texts: list[str], sep: int) -> list[list[int]]:
    encoded = tok.tokenizer.encode_batch(texts, add_special_tokens=False)
    return [[*e.ids, sep] for e in encoded]


def _add_in_shards(
    writers: Sequence[_ShardedStoreWriter], encoded: Sequence[list[list[int]]], shard_tokens: int
) -> None:
    """Add aligned batches (one per writer), cutting every writer's shard at the same
    sentence once one of them holds ``shard_tokens`` tokens or :data:`SHARD_SENTENCES`."""
    count, start = len(encoded[0]), 0
    while start < count:
        room = [shard_tokens - w.shard_tokens for w in writers]
        sentences_left = SHARD_SENTENCES - writers[0].shard_sentences
        used = [0] * len(writers)
        stop = start
        while (
            stop < count
            and stop - start < sentences_left
            and all(u < r for u, r in zip(used, room, strict=True))
        ):
            for k, batch in enumerate(encoded):
                used[k] += len(batch[stop])
            stop += 1
        for writer, batch in zip(writers, encoded, strict=True):
            writer.add(batch[start:stop])
        if any(w.shard_tokens >= shard_tokens for w in writers) or (
            writers[0].shard_sentences >= SHARD_SENTENCES
        ):
            for writer in writers:
                writer.cut()
        start = stop


def _write_stream(
    folder: Path,
    sentences: Iterable[str],
    tok: SharedBPETokenizer,
    fingerprint: str,
    shard_tokens: int,
) -> dict[str, Any]:
    """One language's MLM stream as a store: each sentence's ids, then ``</s>``."""
    sep = tok.vocab_info.sep_id
    with atomic_directory(folder) as tmp:
        writer = _ShardedStoreWriter(tmp, token_dtype(tok.vocab_size), document_per_sentence=False)
        for batch in _batches(sentences, BATCH_SENTENCES):
            _add_in_shards([writer], [_encode(tok, batch, sep)], shard_tokens)
        totals = writer.finish(fingerprint)
    return totals


def _write_parallel(
    folder: Path,
    corpus: ParallelSource,
    tok: SharedBPETokenizer,
    fingerprint: str,
    shard_tokens: int,
) -> dict[str, Any]:
    """A parallel corpus as two stores cut at the same pairs: pair i = document i of each."""
    sep = tok.vocab_info.sep_id
    dtype = token_dtype(tok.vocab_size)
    with atomic_directory(folder) as tmp:
        source = _ShardedStoreWriter(tmp / "source", dtype, document_per_sentence=True)
        target = _ShardedStoreWriter(tmp / "target", dtype, document_per_sentence=True)
        for batch in _batches(corpus.iter_pairs(), BATCH_SENTENCES):
            encoded = [_encode(tok, [pair[i] for pair in batch], sep) for i in (0, 1)]
            _add_in_shards([source, target], encoded, shard_tokens)
        totals = source.finish(fingerprint)
        target.finish(fingerprint)
    return totals


def _complete(out: Path) -> bool:
    """Whether ``out`` holds a manifest and every store it lists (a deleted store is rebuilt)."""
    if not (out / MANIFEST).is_file():
        return False
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    stores = [out / item["dir"] for item in manifest["mono"]]
    stores += [out / item["dir"] / side for item in manifest["parallel"] for side in SIDES]
    return all((store / MANIFEST).is_file() for store in stores)


def prepare_xlm(
    monolingual: Paths | None = None,
    parallel: Paths | None = None,
    *,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    vocab_alpha: float = 0.5,
    lowercase: bool = True,
    tokenizer_sample: int | None = None,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
) -> Path:
    """Prepare XLM's corpora once into a cache folder keyed by their fingerprint.

    Args:
        monolingual: ``<lang>.txt`` files or folders (None: parallel data only).
        parallel: ``*.tsv`` or aligned file pairs (None: monolingual data only).
        tokenizer: a saved :class:`SharedBPETokenizer` folder; None trains one (cached).
        vocab_size, vocab_alpha, lowercase: the trained vocabulary's size, the language
            smoothing of its sample, and lower-casing.
        tokenizer_sample: sentences in the BPE sample (default: as many as the corpora
            hold, at most :data:`~ptm_multilingual.tokenizer.DEFAULT_SAMPLE_SENTENCES`).
        seed: seed of the BPE sample.
        cache_dir: the cache root (default core's :func:`default_cache_dir`).
        shard_tokens: tokens per shard file.

    Returns:
        The prepared folder (open it with
        :meth:`~ptm_multilingual.prepared_reader.PreparedXLM.open`).

    Raises:
        CorpusError: a bad file name, a bad line (``file:line``) or misaligned parallel files.
    """
    inputs = XLMInputs.find(monolingual, parallel)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    identity = inputs.identity()
    tok = ready_xlm_tokenizer(
        inputs,
        identity,
        root,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        vocab_alpha=vocab_alpha,
        lowercase=lowercase,
        sample_size=tokenizer_sample,
        seed=seed,
    )
    with tempfile.TemporaryDirectory(prefix="ptm-xlm-tokenizer-") as scratch:
        tok_sha = tokenizer_sha256(tok.save(scratch))
    settings = {"shard_tokens": shard_tokens, "mlm_from_parallel": not inputs.monolingual}
    fingerprint = _digest(
        {"format": FORMAT, "inputs": _content_only(identity), "tokenizer": tok_sha, **settings}
    )
    out = root / "xlm" / fingerprint[:20]
    if _complete(out):
        logger.info("XLM corpora already prepared in %s", out)
        return out
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    if not (out / TOKENIZER_DIR).is_dir():
        with atomic_directory(out / TOKENIZER_DIR) as tmp:
            tok.save(tmp)
    mono: list[dict[str, Any]] = []
    for lang, openers in inputs.mlm_streams().items():
        folder = out / "mono" / lang
        if (folder / MANIFEST).is_file():
            totals = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["totals"]
        else:
            totals = _write_stream(folder, _chain(openers), tok, fingerprint, shard_tokens)
        mono.append({"lang": lang, "dir": f"mono/{lang}", **totals})
    corpora: list[dict[str, Any]] = []
    for k, corpus in enumerate(inputs.parallel):
        rel = f"parallel/{k:03d}-{corpus.name}"
        folder = out / rel
        if all((folder / side / MANIFEST).is_file() for side in SIDES):
            totals = json.loads((folder / "source" / MANIFEST).read_text("utf-8"))["totals"]
        else:
            totals = _write_parallel(folder, corpus, tok, fingerprint, shard_tokens)
        corpora.append(
            {
                "name": corpus.name,
                "source_lang": corpus.source_lang,
                "target_lang": corpus.target_lang,
                "source": corpus.source,
                "dir": rel,
                "pairs": totals["documents"],
            }
        )
    manifest = {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "inputs": identity,
        "tokenizer": {"sha256": tok_sha, "vocab_size": tok.vocab_size, "languages": tok.languages},
        "settings": settings,
        "mono": mono,
        "parallel": corpora,
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    logger.info("prepared XLM corpora into %s in %.1f s", out, time.perf_counter() - started)
    return out


__all__ = [
    "DEFAULT_SHARD_TOKENS",
    "FORMAT",
    "XLMInputs",
    "prepare_xlm",
    "ready_xlm_tokenizer",
]
