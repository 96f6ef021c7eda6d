"""``ptm prepare``: tokenize a corpus once into memory-mapped shards, in parallel, resumably.

Three steps, each a public function so a Prefect flow can map the middle one:

1. :func:`plan_shards` finds the inputs, hashes them and cuts them into pieces of about
   ``shard_bytes`` of text (one pass per changed file), makes the tokenizer ready (given,
   reused, or trained on a stream of the first ``tokenizer_sample_bytes`` of sentences) and
   lists the shards, marking those already on disk with matching checksums as done.
2. :func:`prepare_shard` (:mod:`ptm_core.data.shard_writer`) writes one shard; the library
   runs the pending ones in worker processes (:func:`run_shards`).
3. :func:`write_manifest` writes ``manifest.json`` last, atomically, and removes shards no
   longer referenced.

What is reused (make/rsync style): an input whose path, size and ``mtime_ns`` equal the
previous run's entry is not read again (its hash and cut points are taken from
``manifest.json``, or ``plan.json`` after an interrupted run). A shard is named by a hash
of what its ids depend on (input content hash, byte/row range, tokenizer hash, text field,
format), so re-running on unchanged inputs builds nothing and rewrites nothing; a new
input builds only its own shards; after a crash (even ``kill -9``) the finished shards are
kept and the rest are built; a shard whose checksum no longer matches is rebuilt.

A trained tokenizer depends on its sample, so adding a file rebuilds everything when the
sample changes (a corpus smaller than the sample); a given tokenizer, or a corpus whose
first ``tokenizer_sample_bytes`` are unchanged, keeps the other shards.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text, file_in_the_way
from ptm_core.data.corpus import CorpusError
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
    shard_file,
    token_dtype,
    verify_shards,
)
from ptm_core.data.prepared_tokenizer import ready_tokenizer, tokenizer_spec
from ptm_core.data.shard_writer import ShardTask, prepare_shard, run_shards
from ptm_core.data.sources import (
    InputFile,
    InputPath,
    Piece,
    ScannedInput,
    find_inputs,
    scan_input,
)
from ptm_core.tokenization import SPECIAL_TOKENS

logger = logging.getLogger(__name__)

DEFAULT_SHARD_BYTES = 16 * 2**20  # 1 GB of text: ~60 shards, so workers stay busy to the end
DEFAULT_SAMPLE_BYTES = 256 * 2**20
PLAN = "plan.json"  # the inputs' hashes and cuts, kept while a run has no manifest yet
LOCK = ".lock"


@dataclass
class PreparationPlan:
    """What :func:`plan_shards` decided; :func:`write_manifest` turns it into the manifest.

    Args:
        output_dir: The prepared corpus folder.
        fingerprint: SHA-256 of the inputs (names, sizes, contents), the tokenizer and the
            settings that change ids.
        manifest: The manifest's fields except ``shards``, ``totals`` and ``created``.
        shards: Every shard in corpus order (a name repeats for identical input files).
        pending: The shards to build (each name once).
        done: Records of the shards already on disk with matching checksums.
        up_to_date: The folder already holds this corpus: nothing to build or write.
    """

    output_dir: Path
    fingerprint: str
    manifest: dict[str, Any]
    shards: list[ShardTask]
    pending: list[ShardTask]
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    up_to_date: bool = False


# ---------------------------------------------------------------------- settings


def check_preparation_settings(
    *,
    vocab_size: int = 8000,
    workers: int | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> None:
    """Fail on a setting out of range before any input is read or any folder made.

    Args:
        vocab_size: Size of a trained vocabulary.
        workers: Worker processes (``None``: one per core).
        shard_bytes: Target bytes of text per shard.
        tokenizer_sample_bytes: Sentence bytes a trained tokenizer reads.

    Raises:
        ValueError: One line naming the setting (and its ``ptm prepare`` flag) and its range.
    """
    least = len(SPECIAL_TOKENS) + 1
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < least:
        raise ValueError(
            f"vocab_size (--vocab-size) is {vocab_size!r}; it must be an integer of at least "
            f"{least} ({len(SPECIAL_TOKENS)} special tokens {' '.join(SPECIAL_TOKENS)} plus "
            "the characters of the corpus, counted once the tokenizer is trained); the default "
            "is 8000"
        )
    if workers is not None and (isinstance(workers, bool) or workers < 0):
        raise ValueError(
            f"workers (--workers) is {workers!r}; it must be 0 (this process only) or more, "
            "or left out (one per core)"
        )
    for name, value in (
        ("shard_bytes", shard_bytes),
        ("tokenizer_sample_bytes", tokenizer_sample_bytes),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} is {value!r}; it must be a positive number of bytes")


# ---------------------------------------------------------------------- planning


def plan_shards(
    inputs: InputPath | Sequence[InputPath],
    output_dir: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    text_field: str = "text",
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> PreparationPlan:
    """Scan the inputs, make the tokenizer ready and list the shards to build.

    Side effects, all in ``output_dir``: leftover temporary files are removed, the
    tokenizer is written to ``tokenizer/`` when it changed, and ``plan.json`` caches the
    scan of changed inputs. Call it under :func:`preparation_lock`.

    Args:
        inputs: Files, folders or glob patterns (see :func:`ptm_core.data.sources.find_inputs`).
        output_dir: The prepared corpus folder (created if missing).
        tokenizer: A ``vocab.txt`` or a tokenizer folder; ``None`` trains one.
        vocab_size: Size of a trained vocabulary.
        lowercase: Lowercase (a trained tokenizer, or a given ``vocab.txt``).
        shard_bytes: Target bytes of text per shard.
        text_field: The JSONL key or Arrow/Parquet column holding the text.
        tokenizer_sample_bytes: A trained tokenizer reads the first this many bytes of
            sentences, in input order.

    Returns:
        The plan.

    Raises:
        CorpusError: A missing or unreadable input, or a bad line in the tokenizer sample.
    """
    check_preparation_settings(
        vocab_size=vocab_size,
        shard_bytes=shard_bytes,
        tokenizer_sample_bytes=tokenizer_sample_bytes,
    )
    out = Path(output_dir)
    (out / SHARDS_DIR).mkdir(parents=True, exist_ok=True)
    remove_temporary_files(out)
    previous = _read_previous(out)
    known = _known_inputs(out, previous)
    scanned: list[ScannedInput] = []
    fresh = False
    for file in find_inputs(inputs):
        cached = _cached_scan(file, known.get(str(file.path)), shard_bytes, text_field)
        if cached is None:
            cached = scan_input(file, shard_bytes, text_field)
            fresh = True
        scanned.append(cached)
    entries = [_input_entry(s, shard_bytes, text_field) for s in scanned]
    spec = tokenizer_spec(tokenizer, vocab_size, lowercase, tokenizer_sample_bytes, text_field)
    settings = {
        "text_field": text_field,
        "shard_bytes": shard_bytes,
        "vocab_size": vocab_size,
        "lowercase": lowercase,
        "tokenizer_sample_bytes": tokenizer_sample_bytes,
    }
    fingerprint = _fingerprint(scanned, spec, text_field)
    earlier = _earlier_tokenizers(out, previous)
    token_entry = ready_tokenizer(out, tokenizer, spec, scanned, settings, earlier)
    if fresh or token_entry not in earlier:
        # An interrupted run resumes from here without hashing or training again.
        plan = {"format": FORMAT, "inputs": entries, "tokenizer": token_entry}
        atomic_write_text(out / PLAN, json.dumps(plan, indent=1) + "\n")
    dtype = str(token_dtype(token_entry["vocab_size"]))
    shards = [
        ShardTask(
            name=_shard_name(s, piece, token_entry["sha256"], dtype, text_field),
            piece=piece,
            output_dir=str(out.resolve()),
            tokenizer_sha256=token_entry["sha256"],
            dtype=dtype,
            text_field=text_field,
        )
        for s in scanned
        for piece in s.pieces
    ]
    unique = list({task.name: task for task in shards}.values())
    done = _finished_records(out, unique)
    pending = [task for task in unique if task.name not in done]
    manifest = {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "inputs": entries,
        "tokenizer": token_entry,
        "settings": settings,
        "dtype": dtype,
    }
    up_to_date = (
        not pending
        and previous is not None
        and previous.get("fingerprint") == fingerprint
        and previous.get("settings") == settings
        and previous.get("inputs") == entries
        and [s["name"] for s in previous.get("shards", [])] == [t.name for t in shards]
        and _sources(previous) == [t.piece.to_dict() for t in shards]
    )
    return PreparationPlan(out, fingerprint, manifest, shards, pending, done, up_to_date)


def _read_previous(out: Path) -> dict[str, Any] | None:
    try:
        return read_manifest(out)
    except PreparedDataError:
        return None  # missing, unreadable or of another format: prepared again


def _sources(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(s["source"]) for s in manifest.get("shards", [])]


def _known_inputs(out: Path, previous: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Scans of earlier runs by path: the manifest's, then a newer ``plan.json``'s."""
    known = {e["path"]: e for e in (previous or {}).get("inputs", [])}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        plan = json.loads((out / PLAN).read_text(encoding="utf-8"))
        known.update({e["path"]: e for e in plan["inputs"]})
    return known


def _earlier_tokenizers(out: Path, previous: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Tokenizer entries of an interrupted run (``plan.json``), then of the manifest."""
    entries = []
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        entries.append(dict(json.loads((out / PLAN).read_text(encoding="utf-8"))["tokenizer"]))
    if previous is not None and isinstance(previous.get("tokenizer"), dict):
        entries.append(previous["tokenizer"])
    return entries


def _input_entry(scan: ScannedInput, shard_bytes: int, text_field: str) -> dict[str, Any]:
    return {
        "path": str(scan.file.path),
        "kind": scan.file.kind,
        "compression": scan.file.compression,
        "size": scan.size,
        "mtime_ns": scan.mtime_ns,
        "sha256": scan.sha256,
        "shard_bytes": shard_bytes,
        "text_field": text_field,
        "pieces": [[p.unit, p.start, p.stop, p.line_base, p.sha256] for p in scan.pieces],
    }


def _cached_scan(
    file: InputFile, entry: Mapping[str, Any] | None, shard_bytes: int, text_field: str
) -> ScannedInput | None:
    """An earlier scan of ``file`` when its size and ``mtime_ns`` are unchanged."""
    if entry is None:
        return None
    try:
        stat = file.path.stat()
        if (
            entry["size"] != stat.st_size
            or entry["mtime_ns"] != stat.st_mtime_ns
            or entry["shard_bytes"] != shard_bytes
            or entry["text_field"] != text_field
            or entry["kind"] != file.kind
        ):
            return None
        pieces = tuple(
            Piece(str(file.path), file.kind, file.compression, unit, start, stop, base, sha)
            for unit, start, stop, base, sha in entry["pieces"]
        )
        return ScannedInput(file, stat.st_size, stat.st_mtime_ns, entry["sha256"], pieces)
    except (OSError, KeyError, TypeError, ValueError):
        return None


def _fingerprint(scanned: Sequence[ScannedInput], spec: Mapping[str, Any], text_field: str) -> str:
    identity = {
        "format": FORMAT,
        "inputs": [[s.file.path.name, s.size, s.sha256] for s in scanned],
        "tokenizer": spec,
        "text_field": text_field,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _shard_name(
    scan: ScannedInput, piece: Piece, tokenizer_sha: str, dtype: str, text_field: str
) -> str:
    # What the ids depend on, and nothing else: not the path (a moved or renamed input keeps
    # its shards) and, for plain text, not the whole file (editing one line of a large file
    # rebuilds the pieces from that line on; the earlier ones keep their shards).
    if piece.unit == "bytes":
        content: dict[str, Any] = {"piece": piece.sha256, "file_start": piece.start == 0}
    else:
        content = {"input": scan.sha256, "range": [piece.unit, piece.start, piece.stop]}
    key = {
        "format": FORMAT,
        **content,
        "kind": piece.kind,
        "compression": piece.compression,
        "tokenizer": tokenizer_sha,
        "dtype": dtype,
        "text_field": text_field if piece.kind != "txt" else None,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:NAME_LENGTH]


def _finished_records(out: Path, tasks: Sequence[ShardTask]) -> dict[str, dict[str, Any]]:
    """Records of shards already complete on disk whose files match their checksums."""
    records = {}
    for task in tasks:
        path = out / SHARDS_DIR / f"{task.name}{RECORD_SUFFIX}"
        with contextlib.suppress(OSError, ValueError):
            record = json.loads(path.read_text(encoding="utf-8"))
            if record.get("name") == task.name and record.get("dtype") == task.dtype:
                records[task.name] = record
    damaged = {Path(e.path).name.split(".")[0] for e in verify_shards(out, list(records.values()))}
    for name in damaged:
        logger.warning("shard %s is damaged (checksum mismatch); it is rebuilt", name)
        del records[name]
    return records


# ---------------------------------------------------------------------- finishing


def write_manifest(plan: PreparationPlan, built: Mapping[str, Mapping[str, Any]]) -> None:
    """Write ``manifest.json`` atomically, then drop what it no longer references.

    Unreferenced shard files (of removed inputs or an older tokenizer) and ``plan.json``
    are deleted; ``cache/`` is emptied when the corpus changed (its indexes derive from it).

    Args:
        plan: The plan of this run.
        built: Records of the shards built in this run (``plan.done`` holds the others).

    Raises:
        CorpusError: The corpus holds no sentences at all.
    """
    out = plan.output_dir
    records = {**plan.done, **built}
    missing = [t.name for t in plan.shards if t.name not in records]
    if missing:
        raise RuntimeError(f"shards {missing[:3]} were not built; run `ptm prepare` again")
    keys = ("documents", "sentences", "tokens", "text_bytes")
    shards = [
        {"name": t.name, "source": t.piece.to_dict(), **{k: records[t.name][k] for k in keys}}
        | {"sha256": records[t.name]["sha256"]}
        for t in plan.shards
    ]
    totals = {"shards": len(shards), **{k: sum(s[k] for s in shards) for k in keys}}
    if totals["documents"] == 0:
        names = ", ".join(e["path"] for e in plan.manifest["inputs"]) or "<no inputs>"
        raise CorpusError(
            names,
            None,
            "text",
            "corpus holds no sentences",
            'add text: one sentence per line in .txt, a non-empty "text" per line in .jsonl',
        )
    previous = _read_previous(out)
    manifest = {
        **plan.manifest,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "shards": shards,
        "totals": totals,
    }
    if previous is None or previous.get("fingerprint") != plan.fingerprint:
        _empty_folder(out / CACHE_DIR)
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    _remove_unreferenced(out, {t.name for t in plan.shards})
    with contextlib.suppress(FileNotFoundError):
        (out / PLAN).unlink()


def _empty_folder(folder: Path) -> None:
    if folder.is_dir():
        for child in folder.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    child.unlink()


def _remove_unreferenced(out: Path, names: set[str]) -> None:
    suffixes = (*(f".{kind}" for kind in ("tokens", "sentences.npy", "documents.npy")), ".json")
    for path in (out / SHARDS_DIR).iterdir():
        name, dot, rest = path.name.partition(".")
        if (
            dot
            and len(name) == NAME_LENGTH
            and f".{rest}" in suffixes
            and name not in names
            and all(c in "0123456789abcdef" for c in name)
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def remove_temporary_files(out: Path) -> list[Path]:
    """Remove what a killed run left: hidden ``*.tmp`` files and folders in the corpus folder.

    Only names this module and :mod:`ptm_core.atomic` write match (``.<name>....tmp``); call
    it only while holding :func:`preparation_lock`.

    Returns:
        What was removed.
    """
    removed = []
    for folder in (out, out / SHARDS_DIR, out / TOKENIZER_DIR):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for path in folder.iterdir():
                if path.name.startswith(".") and path.name.endswith((".tmp", ".old")):
                    if path.is_dir() and not path.is_symlink():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
                    removed.append(path)
    return removed


def check_output_folder(output_dir: str | os.PathLike[str]) -> None:
    """Refuse a folder ``ptm prepare`` may not write into, before anything is written.

    A preparation cleans up after itself in its folder (temporary names, shards of earlier
    inputs, its ``cache/``), so it writes only into a new or empty folder or one that is
    already a prepared corpus (its manifest, plan, lock or ``shards/``); a user's folder
    is left alone.

    Raises:
        ValueError: ``output_dir`` (or a folder above it) is an existing file, or it is a
            non-empty folder that is not a prepared corpus.
    """
    out = Path(output_dir)
    blocker = file_in_the_way(out)
    if blocker is not None:
        where = f"{out} is" if blocker == out else f"{out}: {blocker} is"
        raise ValueError(
            f"{where} an existing file, and a prepared corpus is a folder; give a new "
            "folder path (--output) and leave the file where it is"
        )
    if not out.is_dir() or not any(out.iterdir()):
        return
    if _is_prepared_corpus(out):
        return
    raise ValueError(
        f"{out}: a folder that is not empty and is not a prepared corpus (no {MANIFEST} or "
        f"{PLAN} of format {FORMAT!r}); ptm prepare tidies its own files in its folder, so it "
        "does not write into yours: give a new or empty folder (--output)"
    )


def _is_prepared_corpus(out: Path) -> bool:
    """Whether folder ``out`` is ptm prepare's: its manifest or plan (read, not just named:
    a user's own ``manifest.json`` is not ptm's), or only the lock and an empty ``shards/``
    of a preparation killed before it wrote its plan."""
    for name in (MANIFEST, PLAN):
        try:
            record = json.loads((out / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict):
            continue
        if record.get("format") == FORMAT:
            return True
        # A plan written before plans named their format.
        if name == PLAN and isinstance(record.get("inputs"), list) and "tokenizer" in record:
            return True
    # Killed before the plan: the lock comes first, then the tokenizer and its cache.
    names = {p.name for p in out.iterdir()}
    shards = out / SHARDS_DIR
    started = LOCK in names and names <= {LOCK, SHARDS_DIR, TOKENIZER_DIR, CACHE_DIR}
    return started and (not shards.is_dir() or not any(shards.iterdir()))


@contextlib.contextmanager
def preparation_lock(output_dir: str | os.PathLike[str]) -> Iterator[None]:
    """Hold ``<output_dir>/.lock`` so one preparation at a time writes the folder.

    A second ``ptm prepare`` (or a training run preparing its cache) waits, then finds the
    corpus up to date. The lock is an ``flock``: the system releases it when its holder
    dies, even by ``kill -9``. Without ``fcntl`` (Windows) nothing is locked.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(out / LOCK, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            logger.info("waiting for another ptm prepare writing %s", out)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------------- entry points


def prepare_corpus(
    inputs: InputPath | Sequence[InputPath],
    output_dir: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    workers: int | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    text_field: str = "text",
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
    progress: bool = True,
) -> PreparedCorpus:
    """Tokenize a corpus once into a prepared, memory-mapped folder (``ptm prepare``).

    Inputs: ``.txt``/``.jsonl`` files (also ``.gz``/``.zst``), ``datasets.save_to_disk``
    folders, ``.arrow`` and ``.parquet`` files, folders of them and glob patterns
    (:mod:`ptm_core.data.sources`). Neither this process nor a worker holds more than a
    batch of text. Re-running on unchanged inputs returns at once (inputs are compared by
    path, size and ``mtime_ns``, as make and rsync do; shard files are checked by SHA-256);
    see the module docstring for what is rebuilt when something changed.

    Args:
        inputs: Files, folders or glob patterns.
        output_dir: The folder to write (layout: :mod:`ptm_core.data.prepared`).
        tokenizer: A ``vocab.txt`` or tokenizer folder; ``None`` trains a WordPiece
            vocabulary on the first ``tokenizer_sample_bytes`` of sentences.
        vocab_size: Size of a trained vocabulary.
        lowercase: Lowercase (trained tokenizer or given ``vocab.txt``).
        workers: Worker processes (``None``: one per core; ``0``: this process only).
        shard_bytes: Target bytes of text per shard (plain text is cut at a document
            boundary after it; compressed files are one shard each).
        text_field: The JSONL key or Arrow/Parquet column holding the text.
        tokenizer_sample_bytes: Sentence bytes a trained tokenizer reads (default 256 MiB).
        progress: Log a line per shard (and a bar on a terminal).

    Returns:
        The prepared corpus, open.

    Raises:
        CorpusError: A missing input or a bad line (``file:line``); shards finished before
            it stay on disk and are reused by the next run.
    """
    check_output_folder(output_dir)
    check_preparation_settings(
        vocab_size=vocab_size,
        workers=workers,
        shard_bytes=shard_bytes,
        tokenizer_sample_bytes=tokenizer_sample_bytes,
    )
    with preparation_lock(output_dir):
        plan = plan_shards(
            inputs,
            output_dir,
            tokenizer=tokenizer,
            vocab_size=vocab_size,
            lowercase=lowercase,
            shard_bytes=shard_bytes,
            text_field=text_field,
            tokenizer_sample_bytes=tokenizer_sample_bytes,
        )
        if plan.up_to_date:
            if progress:
                logger.info("%s is up to date (%d shards)", output_dir, len(plan.shards))
        else:
            if progress and plan.done:
                logger.info("reusing %d shards already prepared", len(plan.done))
            built = run_shards(plan.pending, workers=workers, progress=progress)
            write_manifest(plan, built)
        # Every shard was just checked (or written): no need to hash them again.
        return PreparedCorpus.open(output_dir, verify=False)


def prepared_cache_dir(
    inputs: InputPath | Sequence[InputPath],
    cache_root: str | os.PathLike[str],
    *,
    tokenizer: str | os.PathLike[str] | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    text_field: str = "text",
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> Path:
    """Where ``ptm pretrain data.corpus=<raw files>`` keeps its prepared corpus.

    Keyed by the inputs *as given* (absolute paths or patterns, not their contents) and
    the settings that change ids, so it costs no file read. The folder is updated in place
    when a file changes or a new file appears in a given folder, and then only the new
    shards are built; a key on the content fingerprint would instead start an empty folder,
    and prepare the whole corpus again, whenever one file is added. Whether the folder is
    current is :func:`prepare_corpus`'s check (stat-based for unchanged inputs).

    Args:
        inputs: As for :func:`prepare_corpus`.
        cache_root: The folder holding the caches.
        tokenizer: As for :func:`prepare_corpus`.
        vocab_size: As for :func:`prepare_corpus`.
        lowercase: As for :func:`prepare_corpus`.
        text_field: As for :func:`prepare_corpus`.
        tokenizer_sample_bytes: As for :func:`prepare_corpus`.

    Returns:
        ``<cache_root>/prepared-<16 hex digits>``.
    """
    items = [inputs] if isinstance(inputs, str | os.PathLike) else list(inputs)
    key = {
        "format": FORMAT,
        "inputs": [os.path.abspath(os.fspath(item)) for item in items],
        "tokenizer": None if tokenizer is None else os.path.abspath(os.fspath(tokenizer)),
        "vocab_size": vocab_size if tokenizer is None else None,
        "lowercase": lowercase,
        "text_field": text_field,
        "tokenizer_sample_bytes": tokenizer_sample_bytes if tokenizer is None else None,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return Path(cache_root) / f"prepared-{digest[:16]}"


__all__ = [
    "DEFAULT_SAMPLE_BYTES",
    "DEFAULT_SHARD_BYTES",
    "PreparationPlan",
    "ShardTask",
    "check_preparation_settings",
    "plan_shards",
    "preparation_lock",
    "prepare_corpus",
    "prepare_shard",
    "prepared_cache_dir",
    "remove_temporary_files",
    "run_shards",
    "shard_file",
    "write_manifest",
]
