"""A linked corpus prepared once for ERNIE: token shards plus entity and unit columns.

The folder is a core prepared corpus (format ``ptm-prepared/1``, read by
:class:`ptm_core.data.prepared.PreparedCorpus`: ``.tokens``, ``.sentences.npy``,
``.documents.npy`` per shard, ``manifest.json`` with a SHA-256 per file) with, beside each
shard's tokens, the knowledge annotations of :func:`~ptm_knowledge.ernie.examples.
annotate_documents`, so ERNIE rows are built per index from memory maps (one shard is
written by :mod:`ptm_knowledge.ernie.linked_shards`)::

    shards/<name>.entity_units   int32 (T,)  entity-mention unit id per token (-1 none)
    shards/<name>.phrase_units   int32 (T,)  phrase unit id per token (-1 none)
    shards/<name>.mentions       int64 (M, 2) (shard-local first piece, shard entity index),
                                 sorted by piece, mention order kept among equal pieces
    shards/<name>.entities.json  the shard's entity ids, each with its first line and count

Unit ids are local to a shard and contiguous per unit (a unit is a run of equal ids);
entity indexes point into the shard's own entity list, so shards are written
independently and the corpus does not depend on any KG embedding order: a run maps each
shard's entity list to its embedding rows when it opens the corpus (unknown ids can be an
error naming ``file:line``). The manifest's ``"ernie"`` block names this format, the
phrase extractor and the entity totals; every extra file's SHA-256 sits in the shard's
``sha256`` record beside the core ones.

:func:`prepare_linked_corpus` streams the JSONL input piece by piece (core's byte pieces,
cut at line ends), validates every record as :func:`~ptm_knowledge.linking.
read_linked_corpus` does, writes each shard under temporary names and renames it when
complete, and writes the manifest last; unchanged pieces keep their shards.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_directory, atomic_write_text
from ptm_core.data.prepare import preparation_lock, remove_temporary_files
from ptm_core.data.prepared import (
    CACHE_DIR,
    FORMAT,
    MANIFEST,
    NAME_LENGTH,
    RECORD_SUFFIX,
    SHARDS_DIR,
    TOKENIZER_DIR,
    PreparedCorpus,
    PreparedDataError,
    read_manifest,
    token_dtype,
    verify_shards,
)
from ptm_core.data.shard_writer import shard_worker_pool, tokenizer_sha256
from ptm_core.data.sources import (
    Piece,
    ScannedInput,
    find_inputs,
    scan_input,
)
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.ernie.linked_shards import (
    LinkedShardTask,
    iter_linked_sentences,
    prepare_linked_shard,
)
from ptm_knowledge.ernie.phrases import PhraseExtractor
from ptm_knowledge.linking.corpus import LinkedCorpusError

logger = logging.getLogger(__name__)

ERNIE_FORMAT = "ptm-ernie/1"
DEFAULT_SHARD_BYTES = 16 * 2**20
DEFAULT_SAMPLE_BYTES = 256 * 2**20
REBUILD = (
    "re-run the same command (or ptm_knowledge.ernie.prepare_linked_corpus): the damaged "
    "shard is rebuilt alone; or delete the folder to prepare it all again"
)


# ---------------------------------------------------------------------- the folder


def phrase_key(phrases: PhraseExtractor | None) -> dict[str, Any] | None:
    """What a phrase extractor's spans depend on (part of every shard name)."""
    if phrases is None:
        return None
    pairs = getattr(phrases, "pairs", None)
    if pairs is not None:
        listed = sorted("\t".join(p) for p in pairs)
        digest = hashlib.sha256("\n".join(listed).encode()).hexdigest()
        return {
            "kind": type(phrases).__name__,
            "pairs": digest,
            "max_length": getattr(phrases, "max_length", None),
        }
    nlp = getattr(phrases, "nlp", None)
    meta = getattr(nlp, "meta", {}) if nlp is not None else {}
    return {"kind": type(phrases).__name__, "pipeline": [meta.get("name"), meta.get("version")]}


def _ready_tokenizer(
    out: Path,
    tokenizer: str | os.PathLike[str] | None,
    vocab_size: int,
    lowercase: bool,
    pieces: Sequence[Piece],
    sample_bytes: int,
    previous: Mapping[str, Any] | None,
    identity: str,
) -> dict[str, Any]:
    """Given (saved), reused (same spec and inputs), or trained on a stream of sentences."""
    target = out / TOKENIZER_DIR
    loaded: TaskTokenizer
    if tokenizer is not None:
        path = Path(tokenizer)
        # A folder's own tokenizer.json: WordPiece (BERT), byte-level BPE (RoBERTa) or
        # Unigram (XLM-R); the mentions align to its pieces through character offsets.
        loaded = (
            WordPieceTokenizer.from_vocab(path, lowercase=lowercase)
            if path.is_file()
            else load_task_tokenizer(path)
        )
        spec: dict[str, Any] = {"given": tokenizer_sha_of(loaded)}
    else:
        spec = {
            "train": {"vocab_size": vocab_size, "lowercase": lowercase, "sample": sample_bytes},
            "inputs": identity,
        }
        old = (previous or {}).get("tokenizer", {})
        if (
            old.get("spec") == spec
            and target.is_dir()
            and tokenizer_sha256(target) == old.get("sha256")
        ):
            return dict(old)
        logger.info("training a WordPiece vocabulary of %d on the linked corpus", vocab_size)
        loaded = WordPieceTokenizer.train(
            iter_linked_sentences(pieces, out / SHARDS_DIR, sample_bytes),
            vocab_size=vocab_size,
            lowercase=lowercase,
        )
    with tempfile.TemporaryDirectory(dir=out, prefix=".tokenizer.", suffix=".tmp") as scratch:
        loaded.save(scratch)
        same = target.is_dir() and tokenizer_sha256(scratch) == tokenizer_sha256(target)
    if not same:
        with atomic_directory(target) as tmp:
            loaded.save(tmp)
    return {
        "sha256": tokenizer_sha256(target),
        "vocab_size": loaded.vocab_size,
        "lowercase": getattr(loaded, "lowercase", None),  # None: the file's own normalizer
        "spec": spec,
    }


def tokenizer_sha_of(tokenizer: TaskTokenizer) -> str:
    """SHA-256 of a tokenizer's saved files."""
    with tempfile.TemporaryDirectory(prefix="ptm-tokenizer-") as scratch:
        tokenizer.save(scratch)
        return tokenizer_sha256(scratch)


def _shard_name(piece: Piece, tokenizer_sha: str, dtype: str, phrases: Any) -> str:
    key = {
        "format": [FORMAT, ERNIE_FORMAT],
        "piece": piece.sha256,
        "file_start": piece.start == 0,
        "tokenizer": tokenizer_sha,
        "dtype": dtype,
        "phrases": phrases,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:NAME_LENGTH]


def verify_ernie_shards(
    directory: str | os.PathLike[str], shards: Sequence[Mapping[str, Any]]
) -> list[PreparedDataError]:
    """Check every shard file (core's and ERNIE's) against the SHA-256 of its record."""
    return verify_shards(directory, list(shards), rebuild=REBUILD)


def _finished(out: Path, tasks: Sequence[LinkedShardTask]) -> dict[str, dict[str, Any]]:
    records = {}
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            record = json.loads((out / SHARDS_DIR / f"{task.name}{RECORD_SUFFIX}").read_text())
            if record.get("name") == task.name and record.get("dtype") == task.dtype:
                records[task.name] = record
    for error in verify_ernie_shards(out, list(records.values())):
        name = Path(error.path).name.split(".")[0]
        if records.pop(name, None) is not None:
            logger.warning("shard %s is damaged (%s); it is rebuilt", name, error.problem)
    return records


def _scan(path: Path, shard_bytes: int, previous: Mapping[str, Any] | None) -> ScannedInput:
    """Core's scan of a JSONL input, reused from the manifest while size and mtime match."""
    (file,) = find_inputs([path])
    if file.kind != "jsonl" or file.compression is not None:
        raise LinkedCorpusError(
            path,
            None,
            "path",
            "a linked corpus is an uncompressed .jsonl file",
            "give the .jsonl file ptm link wrote (decompress it first)",
        )
    stat = file.path.stat()
    for entry in (previous or {}).get("inputs", []):
        if (
            entry.get("path"),
            entry.get("size"),
            entry.get("mtime_ns"),
            entry.get("shard_bytes"),
        ) == (str(file.path), stat.st_size, stat.st_mtime_ns, shard_bytes):
            pieces = tuple(
                Piece(str(file.path), file.kind, None, unit, start, stop, base, sha)
                for unit, start, stop, base, sha in entry["pieces"]
            )
            return ScannedInput(file, stat.st_size, stat.st_mtime_ns, entry["sha256"], pieces)
    return scan_input(file, shard_bytes)


def prepare_linked_corpus(
    linked_corpus: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    phrases: PhraseExtractor | None = None,
    workers: int | None = 0,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> PreparedCorpus:
    """Prepare a linked corpus (``data_specs/linked_corpus``) for ERNIE, once.

    Re-running on an unchanged file (same size and ``mtime_ns``) with the same settings
    does nothing but check sizes; a changed file rebuilds only the pieces whose bytes
    changed; a shard whose checksum no longer matches is rebuilt.

    Args:
        linked_corpus: the ``.jsonl`` file ``ptm link`` wrote.
        output_dir: the folder to write (layout: module docstring).
        tokenizer: a ``vocab.txt`` or tokenizer folder (WordPiece, or a RoBERTa/XLM-R
            folder's ``tokenizer.json``); ``None`` trains a WordPiece
            vocabulary on the first ``tokenizer_sample_bytes`` of sentences.
        vocab_size, lowercase: of a trained (or ``vocab.txt``) tokenizer.
        phrases: the phrase extractor for ERNIE-Baidu's phrase units (``None``: none).
        workers: processes writing shards (``0``: this one; ``None``: one per core).
        shard_bytes: bytes of JSONL per shard.
        tokenizer_sample_bytes: sentence bytes a trained tokenizer reads.

    Returns:
        The prepared corpus (core's reader; :class:`~ptm_knowledge.ernie.knowledge_store.
        KnowledgeStore` adds the annotation columns).

    Raises:
        LinkedCorpusError | CorpusError: a bad line, naming the file and line; the shards
            finished before it stay valid and are reused by the next run.
    """
    out = Path(output_dir)
    with preparation_lock(out):
        (out / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
        remove_temporary_files(out)
        try:
            previous: dict[str, Any] | None = read_manifest(out)
        except PreparedDataError:
            previous = None
        scan = _scan(Path(linked_corpus), shard_bytes, previous)
        identity = scan.sha256
        token_entry = _ready_tokenizer(
            out,
            tokenizer,
            vocab_size,
            lowercase,
            scan.pieces,
            tokenizer_sample_bytes,
            previous,
            identity,
        )
        dtype = str(token_dtype(token_entry["vocab_size"]))
        key = phrase_key(phrases)
        tasks = [
            LinkedShardTask(
                _shard_name(p, token_entry["sha256"], dtype, key),
                p,
                str(out.resolve()),
                token_entry["sha256"],
                dtype,
                phrases,
            )
            for p in scan.pieces
        ]
        unique = list({t.name: t for t in tasks}.values())
        fingerprint = hashlib.sha256(
            json.dumps(
                {
                    "format": [FORMAT, ERNIE_FORMAT],
                    "input": [scan.file.path.name, scan.size, identity],
                    "tokenizer": token_entry["sha256"],
                    "phrases": key,
                },
                sort_keys=True,
            ).encode()
        ).hexdigest()
        names = [t.name for t in tasks]
        if (
            previous is not None
            and previous.get("fingerprint") == fingerprint
            and [s["name"] for s in previous.get("shards", [])] == names
            and not verify_ernie_shards(out, previous["shards"])
        ):
            return PreparedCorpus.open(out, verify=False)  # up to date: every file checked
        done = _finished(out, unique)
        pending = [t for t in unique if t.name not in done]
        built = _run(pending, workers)
        records = {**done, **built}
        _write_manifest(
            out, scan, shard_bytes, token_entry, key, fingerprint, tasks, records, previous
        )
        return PreparedCorpus.open(out, verify=False)


def _run(tasks: Sequence[LinkedShardTask], workers: int | None) -> dict[str, dict[str, Any]]:
    count = min(workers if workers is not None else (os.cpu_count() or 1), len(tasks))
    records: dict[str, dict[str, Any]] = {}
    if count <= 1:
        for task in tasks:
            record = prepare_linked_shard(task)
            records[record["name"]] = record
            logger.info(
                "ERNIE shard %d/%d %s: %d tokens, %d mentions",
                len(records),
                len(tasks),
                task.name,
                record["tokens"],
                record["mentions"],
            )
        return records
    with shard_worker_pool(count) as pool:
        for record in pool.map(prepare_linked_shard, tasks):
            records[record["name"]] = record
    return records


def _write_manifest(
    out: Path,
    scan: ScannedInput,
    shard_bytes: int,
    token_entry: Mapping[str, Any],
    phrases: Any,
    fingerprint: str,
    tasks: Sequence[LinkedShardTask],
    records: Mapping[str, Mapping[str, Any]],
    previous: Mapping[str, Any] | None,
) -> None:
    keys = ("documents", "sentences", "tokens", "text_bytes")
    extra = ("mentions", "entities", "linked_mentions")
    shards = [
        {
            "name": t.name,
            "source": t.piece.to_dict(),
            **{k: records[t.name][k] for k in (*keys, *extra)},
            "sha256": records[t.name]["sha256"],
        }
        for t in tasks
    ]
    totals = {"shards": len(shards), **{k: sum(s[k] for s in shards) for k in keys}}
    if totals["documents"] == 0:
        raise LinkedCorpusError(
            scan.file.path,
            None,
            "sentences",
            "the linked corpus holds no sentences",
            "link a text corpus with sentences first (ptm link)",
        )
    manifest = {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "inputs": [
            {
                "path": str(scan.file.path),
                "kind": "jsonl",
                "compression": None,
                "size": scan.size,
                "mtime_ns": scan.mtime_ns,
                "sha256": scan.sha256,
                "shard_bytes": shard_bytes,
                "pieces": [[p.unit, p.start, p.stop, p.line_base, p.sha256] for p in scan.pieces],
            }
        ],
        "tokenizer": dict(token_entry),
        "settings": {"shard_bytes": shard_bytes},
        "dtype": tasks[0].dtype,
        "ernie": {
            "format": ERNIE_FORMAT,
            "phrases": phrases,
            "mentions": sum(s["linked_mentions"] for s in shards),
        },
        "shards": shards,
        "totals": totals,
    }
    if previous is None or previous.get("fingerprint") != fingerprint:
        cache = out / CACHE_DIR
        if cache.is_dir():
            for child in cache.iterdir():
                with contextlib.suppress(OSError):
                    child.unlink()
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    keep = {t.name for t in tasks}
    for path in (out / SHARDS_DIR).iterdir():
        name = path.name.split(".")[0]
        if len(name) == NAME_LENGTH and name not in keep and not path.name.startswith("."):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


__all__ = [
    "ERNIE_FORMAT",
    "phrase_key",
    "prepare_linked_corpus",
    "verify_ernie_shards",
]
