"""A prepared corpus on disk: memory-mapped token shards that ``ptm prepare`` writes once.

Layout (format ``ptm-prepared/1``)::

    <dir>/manifest.json                written last, atomically: what the folder holds
    <dir>/tokenizer/                   the tokenizer the ids come from (WordPieceTokenizer.save)
    <dir>/shards/<name>.tokens         raw token ids, uint16 when the vocabulary fits, else uint32
    <dir>/shards/<name>.sentences.npy  int64 (S + 1,) token offsets of sentence boundaries
    <dir>/shards/<name>.documents.npy  int64 (D + 1,) sentence offsets of document boundaries
    <dir>/shards/<name>.json           the shard's record: source, counts, sha256 per file
    <dir>/cache/                       derived indexes (example plans); emptied when the data
                                       changes

Offsets in a shard are local to it (each starts at 0), so shards are written independently
and reused as they are when other inputs change; the reader adds each shard's base offset.
A shard's ``<name>`` is the first 20 hex digits of a hash of what its ids depend on (input
content, byte/row range, tokenizer, settings), so an unchanged piece maps to the same files.

``manifest.json``::

    {"format": "ptm-prepared/1", "fingerprint": "<sha256>", "created": "<UTC time>",
     "inputs": [{"path", "size", "mtime_ns", "sha256", "kind", "compression", "pieces"}],
     "tokenizer": {"sha256", "vocab_size", "lowercase", "source", ...},
     "settings": {"text_field", "shard_bytes", "vocab_size", "lowercase", ...},
     "dtype": "uint16" | "uint32",
     "shards": [{"name", "source": {"path", "kind", "unit", "start", "stop", ...},
                 "documents", "sentences", "tokens", "text_bytes",
                 "sha256": {"tokens": ..., "sentences.npy": ..., "documents.npy": ...}}],
     "totals": {"shards", "documents", "sentences", "tokens", "text_bytes"}}

:class:`PreparedCorpus` reads it as a :class:`~ptm_core.data.token_store.TokenStore`:
nothing is loaded but the manifest and two small arrays of per-shard bases (one entry per
shard); shards are memory-mapped when first touched.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ptm_core.data.errors import DataError
from ptm_core.data.sources import file_sha256
from ptm_core.data.token_store import starts_in_range

FORMAT = "ptm-prepared/1"
MANIFEST = "manifest.json"
TOKENIZER_DIR = "tokenizer"
SHARDS_DIR = "shards"
CACHE_DIR = "cache"
# Files of one shard, by the key their digest has in the manifest.
SHARD_FILES = ("tokens", "sentences.npy", "documents.npy")
RECORD_SUFFIX = ".json"
NAME_LENGTH = 20
# Shards kept memory-mapped at once: each holds three file descriptors.
_OPEN_SHARDS = 256
REBUILD = "re-run `ptm prepare` on the same inputs: the damaged shard is rebuilt alone"


class PreparedDataError(DataError):
    """A prepared corpus is missing, of another format, or damaged.

    Arguments and message format: :class:`ptm_core.data.errors.DataError`.
    """


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest dtype of token ids: ``uint16`` up to 65,536 ids, else ``uint32``."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)


def shard_file(directory: str | os.PathLike[str], name: str, kind: str) -> Path:
    """Path of one file of shard ``name``: ``kind`` in :data:`SHARD_FILES`, or ``"json"``."""
    return Path(directory) / SHARDS_DIR / f"{name}.{kind}"


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check ``<directory>/manifest.json``.

    Raises:
        PreparedDataError: No manifest, unreadable JSON, or another format.
    """
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise PreparedDataError(
            path,
            None,
            "path",
            "no prepared corpus here (manifest.json is missing)",
            "prepare it first: ptm prepare INPUT... --output DIR",
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PreparedDataError(
            path, None, "manifest", f"cannot be read ({exc})", "re-run `ptm prepare`"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise PreparedDataError(
            path,
            None,
            "format",
            f"format is {found!r}, not {FORMAT!r}",
            "prepare the corpus again with this version of ptm",
        )
    return manifest


def verify_shards(
    directory: str | os.PathLike[str],
    shards: list[Mapping[str, Any]],
    *,
    threads: int = 4,
    rebuild: str = REBUILD,
) -> list[PreparedDataError]:
    """Check every shard file against the SHA-256 of its record.

    Every file a shard's ``sha256`` record names is checked: the token files of
    :data:`SHARD_FILES` and any a family stores beside them (ERNIE's entity and phrase
    units, say). Files are hashed in threads (``hashlib`` releases the GIL), each once.

    Args:
        directory: The prepared corpus.
        shards: Shard entries of the manifest (``name``, ``sha256``, ``tokens``, ...).
        threads: Files hashed at once.
        rebuild: The fix the errors give (how the folder's maker rebuilds a shard).

    Returns:
        One error per damaged or missing file (empty when all match).
    """
    expected: dict[Path, str] = {}
    for shard in shards:
        digests = shard["sha256"]
        for kind in dict.fromkeys([*SHARD_FILES, *digests]):
            expected[shard_file(directory, shard["name"], kind)] = digests[kind]

    def check(item: tuple[Path, str]) -> PreparedDataError | None:
        path, digest = item
        if not path.is_file():
            return PreparedDataError(path, None, "path", "shard file is missing", rebuild)
        found = file_sha256(path)
        if found != digest:
            return PreparedDataError(
                path,
                None,
                "sha256",
                f"checksum {found[:16]}... does not match the manifest's {digest[:16]}... "
                "(the file is damaged or was changed)",
                rebuild,
            )
        return None

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return [e for e in pool.map(check, expected.items()) if e is not None]


@dataclass
class _Shard:
    tokens: np.ndarray  # (T,) uint16/uint32, memory-mapped
    sentences: np.ndarray  # (S + 1,) int64 local token offsets, memory-mapped
    documents: np.ndarray  # (D + 1,) int64 local sentence offsets, memory-mapped


class PreparedCorpus:
    """A prepared corpus opened read-only: a memory-mapped :class:`TokenStore`.

    Global offsets count documents, sentences and tokens from the first shard on; empty
    sentences and documents were never stored. Opening reads the manifest and keeps three
    ``int64 (K + 1,)`` arrays of shard bases (``K`` non-empty shards); a shard's files are
    memory-mapped when first read (at most 256 shards at once). The object pickles without
    its maps, so DataLoader workers map what they read themselves.

    Open one with :meth:`open`.
    """

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.directory = directory
        self.manifest = manifest
        self.dtype = np.dtype(manifest["dtype"])
        # Empty shards (a piece of blank lines) hold nothing and get no base entry.
        self._names = [s["name"] for s in manifest["shards"] if s["tokens"] > 0]
        kept = [s for s in manifest["shards"] if s["tokens"] > 0]
        self._doc_bases = _bases([s["documents"] for s in kept])
        self._sentence_bases = _bases([s["sentences"] for s in kept])
        self._token_bases = _bases([s["tokens"] for s in kept])
        self._open: OrderedDict[int, _Shard] = OrderedDict()

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, verify: bool = True) -> PreparedCorpus:
        """Open a prepared corpus.

        Args:
            directory: The folder ``ptm prepare`` wrote.
            verify: Check every shard file's SHA-256 against the manifest (reads every
                byte once: ~1 s per GB here). Sizes are always checked.

        Returns:
            The corpus.

        Raises:
            PreparedDataError: No manifest, another format, a missing or truncated shard
                file, or (``verify``) a checksum that does not match; the message names the
                file and says how to rebuild it.
        """
        path = Path(directory)
        manifest = read_manifest(path)
        dtype = np.dtype(manifest["dtype"])
        for shard in manifest["shards"]:
            tokens = shard_file(path, shard["name"], "tokens")
            want = shard["tokens"] * dtype.itemsize
            try:
                size = tokens.stat().st_size
            except FileNotFoundError:
                raise PreparedDataError(
                    tokens, None, "path", "shard file is missing", REBUILD
                ) from None
            if size != want:
                raise PreparedDataError(
                    tokens,
                    None,
                    "size",
                    f"holds {size} bytes, the manifest says {want} (the file was cut short "
                    "or changed)",
                    REBUILD,
                )
        if verify:
            errors = verify_shards(path, manifest["shards"])
            if errors:
                raise errors[0]
        return cls(path, manifest)

    # ------------------------------------------------------------------ description

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the inputs' names, sizes and contents, the tokenizer and the settings."""
        return str(self.manifest["fingerprint"])

    @property
    def tokenizer_dir(self) -> Path:
        """The tokenizer the ids come from (load with ``WordPieceTokenizer.from_directory``)."""
        return self.directory / TOKENIZER_DIR

    @property
    def cache_dir(self) -> Path:
        """A folder for derived indexes (example plans); emptied when the data changes."""
        path = self.directory / CACHE_DIR
        path.mkdir(exist_ok=True)
        return path

    @property
    def num_shards(self) -> int:
        """Shards in the manifest (empty ones included)."""
        return len(self.manifest["shards"])

    @property
    def num_documents(self) -> int:
        """Documents in the corpus."""
        return int(self._doc_bases[-1])

    @property
    def num_sentences(self) -> int:
        """Non-empty sentences in the corpus."""
        return int(self._sentence_bases[-1])

    @property
    def num_tokens(self) -> int:
        """Token ids in the corpus."""
        return int(self._token_bases[-1])

    def __repr__(self) -> str:
        return (
            f"PreparedCorpus({str(self.directory)!r}, documents={self.num_documents}, "
            f"sentences={self.num_sentences}, tokens={self.num_tokens}, dtype={self.dtype})"
        )

    # ------------------------------------------------------------------ TokenStore

    def sentence_offsets(self, document: int) -> np.ndarray:
        """Global token offsets of ``document``'s sentence boundaries.

        Returns:
            ``int64 (n + 1,)`` for ``n`` sentences: sentence ``i`` spans
            ``[out[i], out[i + 1])``.
        """
        if not 0 <= document < self.num_documents:
            raise IndexError(f"document {document} out of range [0, {self.num_documents})")
        index = int(np.searchsorted(self._doc_bases, document, side="right")) - 1
        shard = self._shard(index)
        local = document - int(self._doc_bases[index])
        first, last = int(shard.documents[local]), int(shard.documents[local + 1])
        return shard.sentences[first : last + 1] + self._token_bases[index]

    def document_offsets(self) -> Iterator[np.ndarray]:
        """Global token offsets of document boundaries, one chunk per (non-empty) shard.

        Yields:
            ``int64 (k + 1,)``: document ``j`` of the chunk spans ``[chunk[j], chunk[j + 1])``.
        """
        for index in range(len(self._names)):
            shard = self._shard(index)
            yield shard.sentences[shard.documents] + self._token_bases[index]

    def tokens(self, start: int, stop: int) -> np.ndarray:
        """Token ids in ``[start, stop)``, a range inside one document.

        Returns:
            A read-only ``uint16``/``uint32`` view of the memory map, ``(stop - start,)``.
        """
        index, base = self._shard_holding(start, stop)
        return self._shard(index).tokens[start - base : stop - base]

    def sentence_starts(self, start: int, stop: int) -> np.ndarray:
        """Global offsets of the sentences that begin in ``[start, stop)`` (inside one
        document), read from the shard's sentence boundaries.

        Returns:
            ``int64 (k,)``, increasing.
        """
        index, base = self._shard_holding(start, stop)
        local = starts_in_range(self._shard(index).sentences, start - base, stop - base)
        return local + base

    def _shard_holding(self, start: int, stop: int) -> tuple[int, int]:
        """The shard index and first global token offset of the range ``[start, stop)``."""
        if not 0 <= start <= stop <= self.num_tokens:
            raise IndexError(f"tokens [{start}, {stop}) out of range [0, {self.num_tokens}]")
        index = int(np.searchsorted(self._token_bases, start, side="right")) - 1
        index = min(index, len(self._names) - 1)
        if stop > self._token_bases[index + 1]:
            raise ValueError(
                f"tokens [{start}, {stop}) cross the end of a shard at "
                f"{int(self._token_bases[index + 1])}; ask for a range inside one document"
            )
        return index, int(self._token_bases[index])

    # ------------------------------------------------------------------ mapping

    def _shard(self, index: int) -> _Shard:
        shard = self._open.get(index)
        if shard is not None:
            self._open.move_to_end(index)
            return shard
        name = self._names[index]
        shard = _Shard(
            tokens=np.memmap(shard_file(self.directory, name, "tokens"), self.dtype, mode="r"),
            sentences=np.load(shard_file(self.directory, name, "sentences.npy"), mmap_mode="r"),
            documents=np.load(shard_file(self.directory, name, "documents.npy"), mmap_mode="r"),
        )
        self._open[index] = shard
        if len(self._open) > _OPEN_SHARDS:
            self._open.popitem(last=False)
        return shard

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_open"] = OrderedDict()  # maps are per process
        return state


def _bases(counts: list[int]) -> np.ndarray:
    bases = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=bases[1:])
    return bases


__all__ = [
    "FORMAT",
    "MANIFEST",
    "SHARD_FILES",
    "PreparedCorpus",
    "PreparedDataError",
    "read_manifest",
    "shard_file",
    "token_dtype",
    "verify_shards",
]
