"""Write one shard of a prepared corpus: tokenize a piece of the input, stream ids to disk.

:func:`prepare_shard` is a pure function of its :class:`ShardTask`: it reads the task's
piece, tokenizes its sentences in batches with the fast tokenizer and appends the ids to
the shard's files as it goes, under temporary names; only a complete shard is renamed into
place, its record last. A worker process loads the tokenizer once (cached on its folder
and hash), so the same function runs in the library's process pool, in a Prefect task or
on a Dask worker.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import io
import itertools
import json
import logging
import multiprocessing
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from ptm_core.atomic import atomic_write_text, raise_if_disk_full
from ptm_core.data.prepared import (
    RECORD_SUFFIX,
    SHARD_FILES,
    SHARDS_DIR,
    TOKENIZER_DIR,
    PreparedDataError,
    shard_file,
)
from ptm_core.data.sources import Piece, iter_piece_documents
from ptm_core.data.worker_lifetime import die_with_parent
from ptm_core.tokenization import WordPieceTokenizer

if TYPE_CHECKING:
    from ptm_core.finetune.data.task_tokenizer import TaskTokenizer

logger = logging.getLogger(__name__)

# Sentences tokenized per call: large enough for the Rust side to parallelise, small enough
# that a worker holds about a megabyte of text.
BATCH_SENTENCES = 4096
_BATCH_CHARS = 2**20
_COPY = 8 * 2**20
# Set by the pool's initializer: a worker stops when the process that started it is gone.
_PARENT_PID: int | None = None


@dataclass(frozen=True)
class ShardTask:
    """Everything one shard depends on; the shard's ``name`` is a hash of it.

    Args:
        name: The shard's name (20 hex digits).
        piece: The part of an input file it holds.
        output_dir: The prepared corpus folder.
        tokenizer_sha256: Hash of ``<output_dir>/tokenizer`` (checked before use).
        dtype: ``"uint16"`` or ``"uint32"``.
        text_field: The JSONL key or Arrow/Parquet column holding the text.
        batch_sentences: Sentences tokenized per call (does not change the ids).
    """

    name: str
    piece: Piece
    output_dir: str
    tokenizer_sha256: str
    dtype: str
    text_field: str = "text"
    batch_sentences: int = BATCH_SENTENCES


def tokenizer_sha256(directory: str | os.PathLike[str]) -> str:
    """SHA-256 over a tokenizer folder's files (names and bytes, sorted by name)."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).iterdir()):
        if path.is_file() and not path.name.startswith("."):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=2)
def load_tokenizer(directory: str, sha256: str) -> TaskTokenizer:
    """The tokenizer of a prepared corpus, loaded once per process and checked by hash.

    Raises:
        PreparedDataError: The folder's files no longer hash to ``sha256``.
    """
    found = tokenizer_sha256(directory)
    if found != sha256:
        raise PreparedDataError(
            directory,
            None,
            "sha256",
            "the tokenizer changed while the corpus was being prepared",
            "run `ptm prepare` again (one run per output folder at a time)",
        )
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    return load_task_tokenizer(directory)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MiB (0 where unknown)."""
    try:
        import resource
    except ImportError:
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


def init_worker(parent_pid: int, rayon_threads: int | None) -> None:
    """Initializer of a preparation worker process.

    Args:
        parent_pid: The main process: the worker is killed once it is gone, idle or not
            (:func:`ptm_core.data.worker_lifetime.die_with_parent`), so a killed
            ``ptm prepare`` leaves no worker behind.
        rayon_threads: Threads of the Rust tokenizer per worker (``None``: its default, all
            cores), so that workers times threads does not exceed the cores.
    """
    global _PARENT_PID
    _PARENT_PID = parent_pid
    die_with_parent(parent_pid)
    if rayon_threads is not None:
        os.environ.setdefault("RAYON_NUM_THREADS", str(rayon_threads))


class OffsetsFile:
    """``int64 (n + 1,)`` running offsets appended to a raw file, then written as ``.npy``.

    Nothing grows in memory however many sentences a shard has (a large compressed file is
    one shard).
    """

    def __init__(self, raw: Path) -> None:
        self.raw_path = raw
        self.raw: IO[bytes] = open(raw, "wb")  # noqa: SIM115 (closed in finish/close)
        self.count = 0
        self.total = 0
        self.raw.write(np.zeros(1, dtype=np.int64).tobytes())

    def extend(self, lengths: np.ndarray) -> None:
        if len(lengths):
            offsets = np.cumsum(lengths, dtype=np.int64) + self.total
            self.raw.write(offsets.tobytes())
            self.total = int(offsets[-1])
            self.count += len(lengths)

    def finish(self, path: Path) -> str:
        """Write the ``.npy`` at ``path`` (header, then the raw data); returns its SHA-256."""
        self.raw.close()
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header, {"descr": "<i8", "fortran_order": False, "shape": (self.count + 1,)}
        )
        digest = hashlib.sha256(header.getvalue())
        with open(path, "wb") as out, open(self.raw_path, "rb") as raw:
            out.write(header.getvalue())
            while chunk := raw.read(_COPY):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        self.raw_path.unlink()
        return digest.hexdigest()

    def close(self) -> None:
        self.raw.close()


def prepare_shard(task: ShardTask) -> dict[str, Any]:
    """Tokenize one piece of the input and write it as a shard, atomically.

    Sentences are tokenized ``task.batch_sentences`` at a time
    (:meth:`WordPieceTokenizer.tokenize_ids_batch`, no special tokens); empty sentences, and
    documents left empty, are not stored. The files are written under temporary names and
    renamed when complete; the record ``<name>.json`` is written last, so a shard counts as
    done only when its record exists and its checksums match.

    Args:
        task: The shard to write.

    Returns:
        The record: ``name``, ``source`` (the piece), ``documents``, ``sentences``,
        ``tokens``, ``text_bytes`` (UTF-8 bytes of the stored sentences), ``sha256`` (per
        file in :data:`SHARD_FILES`), ``seconds``, ``peak_rss_mb`` (of the process that
        wrote it, so far).

    Raises:
        CorpusError: A bad line or row in the piece, naming the file and line.
        PreparedDataError: The tokenizer changed under the run.
        DiskFullError: The disk filled up; this shard's temporary files are removed.
    """
    started = time.perf_counter()
    root = Path(task.output_dir)
    tokenizer = load_tokenizer(str(root / TOKENIZER_DIR), task.tokenizer_sha256)
    dtype = np.dtype(task.dtype)
    tag = f"{os.getpid()}-{secrets.token_hex(4)}"
    temporary = {kind: root / SHARDS_DIR / f".{task.name}.{tag}.{kind}.tmp" for kind in SHARD_FILES}
    sentences = OffsetsFile(root / SHARDS_DIR / f".{task.name}.{tag}.sentences.raw.tmp")
    documents = OffsetsFile(root / SHARDS_DIR / f".{task.name}.{tag}.documents.raw.tmp")
    digest = hashlib.sha256()
    text_bytes = 0

    def flush(batch: list[str], sizes: list[int]) -> None:
        nonlocal text_bytes
        if _PARENT_PID is not None and os.getppid() != _PARENT_PID:
            raise SystemExit("ptm prepare: the main process is gone; this worker stops")
        if not batch:
            return
        data, lengths = _tokenize(tokenizer, batch, dtype)
        out.write(data)
        digest.update(data)
        kept = lengths > 0
        # Non-empty sentences per document (every document has at least one sentence).
        starts = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        per_document = np.add.reduceat(kept.astype(np.int64), starts)
        sentences.extend(lengths[kept])
        documents.extend(per_document[per_document > 0])
        text_bytes += sum(len(s.encode("utf-8")) for s in batch)

    try:
        with open(temporary["tokens"], "wb") as out:
            batch: list[str] = []
            sizes: list[int] = []  # sentences of each document in the batch
            chars = 0
            for document in iter_piece_documents(task.piece, task.text_field):
                if not document:
                    continue
                batch.extend(document)
                sizes.append(len(document))
                chars += sum(map(len, document))
                if len(batch) >= task.batch_sentences or chars >= _BATCH_CHARS:
                    flush(batch, sizes)
                    batch, sizes, chars = [], [], 0
            flush(batch, sizes)
            out.flush()
            os.fsync(out.fileno())
        hashes = {
            "tokens": digest.hexdigest(),
            "sentences.npy": sentences.finish(temporary["sentences.npy"]),
            "documents.npy": documents.finish(temporary["documents.npy"]),
        }
        for kind in SHARD_FILES:
            os.replace(temporary[kind], shard_file(root, task.name, kind))
        record = {
            "name": task.name,
            "source": task.piece.to_dict(),
            "documents": documents.count,
            "sentences": sentences.count,
            "tokens": sentences.total,
            "text_bytes": text_bytes,
            "dtype": task.dtype,
            "sha256": hashes,
            "seconds": round(time.perf_counter() - started, 3),
            "peak_rss_mb": peak_rss_mb(),
        }
        atomic_write_text(
            root / SHARDS_DIR / f"{task.name}{RECORD_SUFFIX}", json.dumps(record, indent=1) + "\n"
        )
        return record
    except OSError as exc:
        raise_if_disk_full(exc, root / SHARDS_DIR)  # one line, not errno 28's traceback
        raise
    finally:
        sentences.close()
        documents.close()
        for path in [*temporary.values(), sentences.raw_path, documents.raw_path]:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _tokenize(
    tokenizer: TaskTokenizer, batch: list[str], dtype: np.dtype
) -> tuple[bytes, np.ndarray]:
    """Ids of a batch of sentences as raw bytes of ``dtype``, and ``int64 (n,)`` lengths."""
    if isinstance(tokenizer, WordPieceTokenizer):
        ids = tokenizer.tokenize_ids_batch(batch)
    else:  # a folder's BPE/Unigram tokenizer: its pieces, without <s> ... </s>
        encodings = tokenizer.backend.encode_batch_fast(batch, add_special_tokens=False)
        ids = [encoding.ids for encoding in encodings]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return flat.tobytes(), lengths


def run_shards(
    tasks: Sequence[ShardTask], *, workers: int | None = None, progress: bool = True
) -> dict[str, dict[str, Any]]:
    """Build shards, in worker processes unless ``workers == 0``.

    A failed shard stops the run: shards not started are cancelled, shards being written
    finish (they stay valid for the next run), then the error of the first failed shard in
    corpus order is raised.

    Args:
        tasks: The shards to build.
        workers: Worker processes (``None``: one per core, at most one per shard; ``0``:
            in this process).
        progress: Log a line per shard; a tqdm bar too when stderr is a terminal.

    Returns:
        ``name -> record`` of the shards built.
    """
    records: dict[str, dict[str, Any]] = {}
    if not tasks:
        return records
    total = sum(_piece_bytes(t.piece) for t in tasks)
    bar = _progress_bar(total) if progress else None
    started = time.perf_counter()

    def finished(record: dict[str, Any]) -> None:
        records[record["name"]] = record
        if progress:
            mb = record["text_bytes"] / 1e6
            logger.info(
                "shard %d/%d %s: %.1f MB, %d tokens, %.2f MB/s, writer peak RSS %.0f MiB (%s)",
                len(records),
                len(tasks),
                record["name"],
                mb,
                record["tokens"],
                mb / max(record["seconds"], 1e-9),
                record.get("peak_rss_mb", 0.0),
                _describe(record["source"]),
            )
        if bar is not None:
            bar.update(_piece_bytes(Piece.from_dict(record["source"])))

    try:
        count = min(workers if workers is not None else (os.cpu_count() or 1), len(tasks))
        if workers is None and len(tasks) == 1:
            count = 0  # one shard: starting a worker would only add its start-up time
        if count <= 0:
            for task in tasks:
                finished(prepare_shard(task))
        else:
            _run_in_pool(tasks, count, finished)
    finally:
        if bar is not None:
            bar.close()
    if progress:
        seconds = time.perf_counter() - started
        text = sum(r["text_bytes"] for r in records.values()) / 1e6
        logger.info(
            "prepared %d shards, %.1f MB of text in %.1f s (%.2f MB/s); main process peak "
            "RSS %.0f MiB",
            len(records),
            text,
            seconds,
            text / max(seconds, 1e-9),
            peak_rss_mb(),
        )
    return records


def shard_worker_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """``workers`` processes that build shards, each loading the tokenizer once.

    Spawned, never forked: the parent may hold threads (Prefect, the tokenizers' Rust pool).
    The cores are split between them for the tokenizer's own threads.
    """
    threads = max(1, (os.cpu_count() or 1) // workers)
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=init_worker,
        initargs=(os.getpid(), threads),
    )


def _run_in_pool(
    tasks: Sequence[ShardTask], workers: int, finished: Callable[[dict[str, Any]], None]
) -> None:
    with shard_worker_pool(workers) as pool:
        futures = {pool.submit(prepare_shard, task): i for i, task in enumerate(tasks)}
        errors: dict[int, BaseException] = {}
        for future in concurrent.futures.as_completed(futures):
            if future.cancelled():
                continue
            error = future.exception()
            if error is None:
                finished(future.result())
            else:
                errors[futures[future]] = error
                for other in futures:
                    other.cancel()  # those not started; running ones finish
        if errors:
            raise errors[min(errors)]


def _piece_bytes(piece: Piece) -> int:
    return piece.stop - piece.start if piece.unit in ("bytes", "file") else 0


def _describe(source: Mapping[str, Any]) -> str:
    name = Path(source["path"]).name
    if source["unit"] == "file":
        return name
    return f"{name} {source['unit']} {source['start']}-{source['stop']}"


def _progress_bar(total: int) -> Any:
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc="ptm prepare", file=sys.stderr)
