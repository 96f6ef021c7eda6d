"""A run folder's identity and its writer: resume only the same run, one process at a time.

A run folder (``trainer.output_dir``) records in ``fingerprint.json`` what determines its
result: the trainer settings that change the trajectory, the model's parameter names and
shapes, and, when a flow composed the run, every result-relevant config key with the
*content* of the files and folders it names (model, data, tokenizer, KG). A run resumes
only into a folder of the same fingerprint; otherwise it is refused with one line naming
the differing keys and the choices.

While a run writes to its folder, it holds a POSIX record lock (``fcntl.lockf``) on
``.ptm-run.lock`` there (the holder's pid inside). The kernel drops the lock when the
process dies, so a run killed with ``kill -9`` never blocks its own resume. Not ``flock``:
an flock belongs to the open file, which forked children (DataLoader and ``ptm prepare``
workers) inherit, so a killed run's workers still held it for the moment they took to die
and the resume was refused; a record lock belongs to the process alone.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from torch import nn

from ptm_core.atomic import atomic_write_text, file_in_the_way

logger = logging.getLogger(__name__)

FINGERPRINT_FILE = "fingerprint.json"
LOCK_FILE = ".ptm-run.lock"
# Bumped when the set of fingerprinted keys changes meaning; folders of another version are
# compared on the keys both record, so an upgrade does not refuse every old run.
FINGERPRINT_VERSION = 1
# Files up to this size are hashed whole; larger ones by size, head and tail (a corpus of
# many GB would otherwise cost minutes at every start).
_WHOLE_FILE_BYTES = 64 << 20
_SAMPLE_BYTES = 4 << 20
_MAX_FILES_PER_FOLDER = 20_000

# The identity of the composed run (set by the flows around a recipe), merged into the
# trainer's own fingerprint.
_IDENTITY: ContextVar[Mapping[str, Any] | None] = ContextVar("ptm_run_identity", default=None)


class RunFolderError(ValueError):
    """A run folder cannot be used as asked; the message says why and what to do."""


class RunLockedError(RunFolderError):
    """Another live process is writing to the run folder."""


class RunMismatchError(RunFolderError):
    """The run folder holds a run of another model, data or settings."""


@contextlib.contextmanager
def run_identity(identity: Mapping[str, Any]) -> Iterator[None]:
    """Within this block, trainers add ``identity`` (flat ``key: value``) to their fingerprint.

    The trainer knows its own settings and the model's shapes, not which files the model and
    data came from; a flow that composed the whole config wraps the recipe in this.

    Args:
        identity: flat mapping of result-relevant keys to JSON values (file contents as
            :func:`path_identity` strings).
    """
    token = _IDENTITY.set(dict(identity))
    try:
        yield
    finally:
        _IDENTITY.reset(token)


def current_identity() -> dict[str, Any]:
    """The identity set by the innermost :func:`run_identity` block (empty outside one)."""
    return dict(_IDENTITY.get() or {})


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        if size <= _WHOLE_FILE_BYTES:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        else:
            digest.update(handle.read(_SAMPLE_BYTES))
            handle.seek(size - _SAMPLE_BYTES)
            digest.update(handle.read(_SAMPLE_BYTES))
    return digest.hexdigest()


def _prepared_fingerprint(folder: Path) -> str | None:
    # A prepared corpus (ptm prepare) names its content in its manifest: no need to hash GBs.
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not str(data.get("format", "")).startswith("ptm-prepared"):
        return None
    fingerprint = data.get("fingerprint")
    return fingerprint if isinstance(fingerprint, str) and fingerprint else None


def path_identity(path: str | os.PathLike[str]) -> str:
    """A short content hash of a file, or of every file under a folder (names included).

    Hidden entries (``.name``: temp files of atomic writes, locks) and ``cache/`` folders
    (indexes a run derives) and ``metrics.json`` files (measurements, not weights) are
    skipped, so a folder ptm is writing next to keeps its
    identity; a prepared corpus is identified by its manifest's fingerprint. The path itself is not part of it: the same
    model copied elsewhere is the same model.

    Args:
        path: an existing file or folder.

    Returns:
        ``"file:<hash>"`` or ``"folder:<hash>"`` (16 hex digits).
    """
    path = Path(path)
    if path.is_file():
        return "file:" + _file_digest(path)[:16]
    prepared = _prepared_fingerprint(path)
    if prepared is not None:
        return "prepared:" + prepared[:16]
    digest = hashlib.sha256()
    count = 0
    for root, dirs, files in os.walk(path):
        # cache/: derived indexes that training itself adds (example plans of prepared data).
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "cache")
        # metrics.json: what a run measured about itself (scores, seconds, peak memory) is
        # not the model; a re-made identical folder (the demo's KG embeddings) keeps its id.
        for name in sorted(f for f in files if not f.startswith(".") and f != "metrics.json"):
            file = Path(root) / name
            if not file.is_file():
                continue
            count += 1
            if count > _MAX_FILES_PER_FOLDER:
                break
            digest.update(f"{file.relative_to(path).as_posix()}\0{_file_digest(file)}\n".encode())
    return "folder:" + digest.hexdigest()[:16]


def read_fingerprint(output_dir: Path) -> dict[str, Any] | None:
    """The fingerprint a folder records, or ``None`` for a folder written before them."""
    file = Path(output_dir) / FINGERPRINT_FILE
    if not file.is_file():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFolderError(
            f"{file} cannot be read ({type(exc).__name__}); it records which run this folder "
            "holds: restore it, or give this run another trainer.output_dir"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), dict):
        raise RunFolderError(
            f"{file} is not a ptm run fingerprint (no 'keys' mapping); restore it, or give this "
            "run another trainer.output_dir"
        )
    return data


def write_fingerprint(output_dir: Path, keys: Mapping[str, Any]) -> None:
    """Record ``keys`` as the folder's fingerprint (atomically)."""
    record = {"version": FINGERPRINT_VERSION, "keys": dict(sorted(keys.items()))}
    atomic_write_text(Path(output_dir) / FINGERPRINT_FILE, json.dumps(record, indent=1) + "\n")


def normalize(value: Any) -> Any:
    """The value as it reads back from JSON (tuples become lists), for comparisons."""
    return json.loads(json.dumps(value, default=str))


def differing_keys(recorded: Mapping[str, Any], keys: Mapping[str, Any]) -> list[str]:
    """The keys whose values differ between a recorded fingerprint and this run's.

    A key recorded by one side only differs too, unless the recorded fingerprint is of
    another :data:`FINGERPRINT_VERSION` (then only the keys both record are compared). A
    key set to null is the same as a key not there: a config key added later with a null
    default (``family: null``) does not make older runs differ.
    """
    old = recorded.get("keys", {})
    new = normalize(dict(keys))
    if recorded.get("version") == FINGERPRINT_VERSION:
        names = set(old) | set(new)
    else:
        names = set(old) & set(new)
    return sorted(n for n in names if old.get(n) != new.get(n))


def _short(value: Any) -> str:
    text = "(absent)" if value is None else json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def mismatch_message(
    output_dir: Path, recorded: Mapping[str, Any], keys: Mapping[str, Any], names: list[str]
) -> str:
    """One line: the folder, the differing keys (old -> new) and the three ways on."""
    old, new = recorded.get("keys", {}), normalize(dict(keys))
    shown = [f"{n} {_short(old.get(n))} -> {_short(new.get(n))}" for n in names[:4]]
    more = f" and {len(names) - 4} more" if len(names) > 4 else ""
    return (
        f"{output_dir} holds a run of other settings ({'; '.join(shown)}{more}); give this run "
        "a new trainer.output_dir, or start fresh with trainer.resume=false (--overwrite: the "
        "old run's files are moved to previous-run-*), or resume it anyway with "
        "trainer.resume=force"
    )


class TrainingInterrupted(KeyboardInterrupt):
    """Ctrl-C during training; the message says where it stopped and where a rerun resumes.

    Attributes:
        step: the last optimizer step completed.
        resume_step: the step of the newest complete checkpoint (0 if there is none).
    """

    def __init__(self, step: int, resume_step: int) -> None:
        super().__init__(
            f"interrupted at step {step}; the same command resumes from step {resume_step}"
        )
        self.step = step
        self.resume_step = resume_step


def architecture_hash(model: nn.Module) -> str:
    """A hash of the parameter and buffer names, shapes and dtypes: what a checkpoint must fit."""
    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(f"{name}:{tuple(tensor.shape)}:{tensor.dtype}\n".encode())
    return digest.hexdigest()[:16]


def check_fingerprint(output_dir: Path, keys: Mapping[str, Any], resume: bool | str) -> None:
    """Refuse to resume a folder that holds another run; then record ``keys`` as its fingerprint.

    Args:
        output_dir: the run folder, which holds a checkpoint to resume.
        keys: this run's fingerprint.
        resume: the trainer's ``resume`` setting (``"force"`` resumes despite a mismatch).

    Raises:
        RunMismatchError: the recorded fingerprint differs and ``resume`` is not ``"force"``.
    """
    recorded = read_fingerprint(output_dir)
    if recorded is None:
        logger.warning(
            "%s has no %s (written before ptm recorded what a run folder holds); resuming it "
            "unchecked, as before.",
            output_dir,
            FINGERPRINT_FILE,
        )
    else:
        changed = differing_keys(recorded, keys)
        if changed and resume != "force":
            raise RunMismatchError(mismatch_message(output_dir, recorded, keys, changed))
        if changed:
            logger.warning(
                "trainer.resume=force: resuming %s though %s differ; the run will not match an "
                "uninterrupted one.",
                output_dir,
                ", ".join(changed),
            )
    write_fingerprint(output_dir, keys)


class _Held:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.count = 0


_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def _holder_pid(lock_file: Path) -> str:
    try:
        text = lock_file.read_text(encoding="utf-8").strip()
    except OSError:
        return "unknown"
    return text or "unknown"


@contextlib.contextmanager
def locked_run_folder(output_dir: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the run folder's lock for this block; re-entrant within one process.

    Args:
        output_dir: the run folder (created if missing).

    Yields:
        The run folder.

    Raises:
        RunLockedError: another live process holds the lock (the message names its pid).
        RunFolderError: ``output_dir``, or a folder above it, is an existing file.
    """
    folder = Path(output_dir)
    blocker = file_in_the_way(folder)  # the folder itself, or one above it
    if blocker is not None:
        where = "" if blocker == folder else f": {blocker}"
        raise RunFolderError(
            f"trainer.output_dir={folder}{where} is a file, not a folder; give a folder for "
            "the run (it is created if missing)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    key = str(folder.resolve())
    with _HELD_LOCK:
        held = _HELD.get(key)
        if held is None:
            lock_file = folder / LOCK_FILE
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise RunLockedError(
                    f"{folder} is being written by another ptm run (pid "
                    f"{_holder_pid(lock_file)}); wait for it to end, or give this run "
                    "another trainer.output_dir"
                ) from None
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            held = _HELD[key] = _Held(fd)
        held.count += 1
    try:
        yield folder
    finally:
        with _HELD_LOCK:
            held.count -= 1
            if held.count == 0:
                del _HELD[key]
                # Closing drops the lock; the file stays (removing it would race with a
                # process that opened it and is about to lock it).
                os.close(held.fd)
