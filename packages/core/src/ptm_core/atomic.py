"""Atomic writes: a reader sees the old file/directory or the new one, never half of one."""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

# Below this many free bytes a failed write is taken for a full disk: torch's own error
# for it says only "unexpected pos 576 vs 534" or "file write failed".
_FULL_DISK_BYTES = 16 * 2**20


#: What to do after a full disk, for a write that is simply run again (the default).
RUN_AGAIN_HINT = "Free some space or write somewhere else, then run the command again"
#: What to do after a full disk during training: the run resumes where it stopped.
TRAINING_HINT = (
    "Free some space or write somewhere else (e.g. another trainer.output_dir), then run "
    "again: training resumes from its last complete checkpoint"
)


class DiskFullError(OSError):
    """A write failed because its file system is full; nothing was replaced.

    Args:
        path: the file or directory that was being written.
        free: bytes still free on that file system.
        hint: what the user can do now; it depends on the writer (a training run
            resumes, an export is simply run again).
    """

    def __init__(self, path: Path, free: int, hint: str = RUN_AGAIN_HINT) -> None:
        super().__init__(
            errno.ENOSPC,
            f"no space left on the device while writing {path} ({free / 2**20:.1f} MiB free); "
            f"nothing was replaced. {hint}",
        )
        self.path = path
        self.free = free
        self.hint = hint

    def __reduce__(self) -> tuple[type[DiskFullError], tuple[Path, int, str]]:
        # OSError pickles as (errno, strerror): rebuild from our own arguments instead, so
        # the error crosses from a worker process (ptm prepare --workers) intact.
        return (DiskFullError, (self.path, self.free, self.hint))

    def __str__(self) -> str:
        return str(self.strerror)  # one line, without OSError's "[Errno 28] " prefix

    def with_hint(self, hint: str) -> DiskFullError:
        """The same error with another caller's advice (chained to this one)."""
        error = DiskFullError(self.path, self.free, hint)
        error.__cause__ = self.__cause__
        return error


#: ptm's marker: every directory published by :func:`atomic_directory` holds this file, so
#: that ptm can tell its own outputs (which it may replace) from a user's folder (never).
OUTPUT_MARKER = ".ptm-output.json"

# JSON files in which ptm has recorded itself (a "ptm_model"/"ptm_format"/"ptm_task" key)
# since before the marker existed.
_PTM_JSON = ("config.json", "task.json")
# A training checkpoint folder: ptm's own layout, with ptm's own keys.
_TRAINER_STATE = "trainer_state.json"


class OutputExistsError(ValueError):
    """ptm refused to write a folder: ``path`` holds something it may not replace.

    A :class:`ValueError`, so the CLI prints its one line and exits 1.
    """


@functools.cache
def _ptm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptm-core")
    except PackageNotFoundError:
        return "unknown"


def _marker_text(kind: str, files: list[str]) -> str:
    # No time stamp: a resumed run must write bit-identical folders. The files ptm wrote
    # are listed, so a replacement can tell a file a user added afterwards.
    record = {"written_by": "ptm", "kind": kind, "ptm_version": _ptm_version(), "files": files}
    return json.dumps(record, indent=2) + "\n"


def _files_added_since(path: Path) -> list[str]:
    """Entries of ptm's folder ``path`` that its marker does not list (a user's own files).

    Empty for a marker without a file list (written before markers listed files)."""
    try:
        listed = json.loads((path / OUTPUT_MARKER).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(listed, list):
        return []
    return sorted(_entries(path) - set(map(str, listed)) - {OUTPUT_MARKER})


def read_output_marker(path: str | Path) -> dict[str, str] | None:
    """ptm's marker of folder ``path`` (``{"written_by", "kind", "ptm_version"}``), or None."""
    try:
        record = json.loads((Path(path) / OUTPUT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("written_by") != "ptm":
        return None
    return {str(k): str(v) for k, v in record.items() if not isinstance(v, list)}


def _json_object(path: Path) -> dict[str, object]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def _entries(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def written_by_ptm_before_markers(path: str | Path, new: str | Path | None = None) -> bool:
    """Whether folder ``path`` (without a marker) is ptm's own, written before the marker.

    Such a folder is recognised by what ptm has always written: a ``config.json`` or
    ``task.json`` with a ``ptm_*`` key (every ``final/`` since #17), a training checkpoint's
    ``trainer_state.json`` with its ``format_version`` and ``step``, or, given the ``new``
    folder about to replace it, contents whose every name the new folder writes again (a
    cache entry, a tokenizer, a prepared corpus re-saved by the same code). Any file the new
    folder would not rewrite (a user's ``keep.txt``) makes it not ptm's. Only internal
    writers, inside places ptm owns (a run folder, a cache), rely on this; a folder a user
    names is replaced only with the marker.
    """
    path = Path(path)
    if any(str(k).startswith("ptm_") for name in _PTM_JSON for k in _json_object(path / name)):
        return True
    state = _json_object(path / _TRAINER_STATE)
    if "format_version" in state and "step" in state:
        return True
    return new is not None and _entries(path) <= _entries(Path(new))


def check_output_directory(
    path: str | Path,
    *,
    kind: str,
    overwrite: bool,
    option: str | None = None,
    legacy: bool = False,
    new: str | Path | None = None,
) -> None:
    """Refuse, with one line, to write a folder of ``kind`` at ``path`` when it may not.

    The one rule for every folder ptm publishes: a missing path or an empty folder is
    written; a file or a link is never replaced by a folder; a non-empty folder without
    :data:`OUTPUT_MARKER` is never replaced (unless ``legacy`` and it is ptm's from before
    the marker); a folder with the marker is replaced only when ``overwrite``, and, for a
    folder a user names (``option`` given), only when it holds an earlier output of the same
    ``kind`` with no file added since ptm wrote it (the marker lists its files).

    Args:
        path: the folder about to be written.
        kind: what will be written (named in the message).
        overwrite: whether a folder carrying ptm's marker may be replaced.
        option: the switch that allows it (``"--overwrite"``), named in the message.
        legacy: whether a pre-marker ptm folder may be replaced
            (:func:`written_by_ptm_before_markers`); undecided without ``new``, so not
            refused then.
        new: the folder that will replace ``path``, once it is built.

    Raises:
        OutputExistsError: ``path`` may not be replaced; the message says why and the fix.
    """
    path = Path(path)
    if path.is_symlink():
        raise OutputExistsError(
            f"{path} is a symbolic link; ptm does not put a folder in place of a link: give "
            "the folder's real path, or another one"
        )
    if not path.exists():
        return
    if not path.is_dir():
        raise OutputExistsError(
            f"{path} is a file, not a folder: ptm writes the {kind} as a folder and never puts "
            "one in place of a file; give another path, or move the file away"
        )
    with os.scandir(path) as entries:
        if next(entries, None) is None:
            return
    marker = read_output_marker(path)
    if marker is not None:
        other = marker.get("kind", "output")
        if overwrite and option is None:  # ptm's own places: a run's final/, caches
            return
        if overwrite:
            # A folder a user names: replaced only when it is an earlier output of the same
            # kind (an export never replaces a run's final/), holding nothing added since.
            if other != kind:
                raise OutputExistsError(
                    f"{path} holds another ptm output (kind {other!r}, not {kind!r}); ptm "
                    f"replaces only an earlier {kind} there, even with {option}: give "
                    "another folder"
                )
            added = _files_added_since(path)
            if added:
                shown = ", ".join(added[:3]) + (
                    f" and {len(added) - 3} more" if len(added) > 3 else ""
                )
                raise OutputExistsError(
                    f"{path} holds files ptm did not write ({shown}); ptm does not delete "
                    f"them, even with {option}: move them away, or give another folder"
                )
            return
        held = (
            f"an earlier ptm {kind}"
            if other == kind
            else f"another ptm output (kind {other!r}, not {kind!r})"
        )
        fix = f"pass {option} to replace it" if option else "this write may not replace it"
        raise OutputExistsError(f"{path} holds {held}; {fix}, or give another folder")
    if legacy and (new is None or written_by_ptm_before_markers(path, new)):
        return
    even = f", not even with {option}" if option else ""
    raise OutputExistsError(
        f"{path} is not empty and ptm did not write it (it has no {OUTPUT_MARKER}); ptm never "
        f"replaces such a folder{even}: give a new or empty folder, or move its files away"
    )


def raise_if_disk_full(exc: BaseException, path: str | Path, hint: str = RUN_AGAIN_HINT) -> None:
    """Raise :class:`DiskFullError` for ``path`` (from ``exc``) if ``exc`` is a full disk.

    For writers that stream into their own temporary files rather than through
    :func:`atomic_file`: call it in their ``except`` clause, after removing what they wrote.
    """
    free = _disk_full(exc, Path(path) if Path(path).exists() else Path(path).parent)
    if free is not None:
        raise DiskFullError(Path(path), free, hint) from exc


def file_in_the_way(path: str | Path) -> Path | None:
    """The existing file (not folder) at ``path`` or above it, which keeps a folder from
    being made there, or None."""
    for candidate in (Path(path), *Path(path).parents):
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def _disk_full(exc: BaseException, probe: Path) -> int | None:
    """Free bytes on ``probe``'s file system if ``exc`` is (most likely) a full disk."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            break
        if "No space left on device" in str(seen):  # safetensors' Rust I/O error
            break
        seen = seen.__cause__ or seen.__context__
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return None
    if seen is None and free >= _FULL_DISK_BYTES:
        return None
    return free


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _plain_file_mode(path: Path) -> None:
    # mkstemp and safetensors' writer create files 0600; give the permissions open() would.
    os.chmod(path, 0o666 & ~_umask())


@contextlib.contextmanager
def atomic_file(path: str | Path, *, hint: str = RUN_AGAIN_HINT) -> Iterator[Path]:
    """Write a file under a temporary name in its folder, then move it to ``path``.

    Yields the temporary path to write (by name, e.g. with ``open`` or ``np.save``). On
    success it is fsynced, given a plain file's mode and renamed over ``path``; on an
    exception it is removed and ``path`` is left untouched.

    Raises:
        DiskFullError: the file system filled up while the file was written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        _plain_file_mode(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        free = _disk_full(exc, path.parent)  # before the cleanup frees space again
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if free is not None:
            raise DiskFullError(path, free, hint) from exc
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory."""
    path = Path(path)
    with atomic_file(path) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_directory(
    path: str | Path,
    *,
    kind: str = "output",
    overwrite: bool = True,
    option: str | None = None,
    legacy: bool = True,
    hint: str = RUN_AGAIN_HINT,
) -> Iterator[Path]:
    """Build a directory under a temporary name, then move it to ``path`` with ptm's marker.

    Yields the temporary directory to fill. On success :data:`OUTPUT_MARKER` is written into
    it and it replaces ``path`` as a whole; on an exception it is removed and ``path`` is
    left untouched. Temporary names start with ``.`` and end with ``.tmp`` so scanners skip
    them. Files are published with the mode a plain ``open()`` gives (safetensors writes
    0600). What may be replaced is decided by :func:`check_output_directory`, before any
    work and again just before the swap. The old folder is renamed away before the new one
    moves in and removed after, so a crash leaves the old or the new, never neither.

    Args:
        path: the directory to publish.
        kind: what the folder holds, recorded in the marker (``"export"``, ``"final"``...).
        overwrite: whether a folder carrying ptm's marker may be replaced.
        option: the switch a user passes to allow that (named in refusals), if any.
        legacy: whether a folder written by ptm before the marker existed may be replaced
            (see :func:`written_by_ptm_before_markers`); internal writers only.
        hint: what to do after a full disk (:data:`TRAINING_HINT` for a training run).

    Raises:
        OutputExistsError: ``path`` is a file, a link, a folder ptm did not write, or a ptm
            output that may not be replaced.
        DiskFullError: the file system filled up while the directory was written.
    """
    path = Path(path)
    check = functools.partial(
        check_output_directory, path, kind=kind, overwrite=overwrite, option=option, legacy=legacy
    )
    check()  # before any work: refuse early
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
    try:
        yield tmp
        written = sorted(_entries(tmp))
        (tmp / OUTPUT_MARKER).write_text(_marker_text(kind, written), encoding="utf-8")
        for child in tmp.rglob("*"):
            if child.is_file():
                _plain_file_mode(child)
                with open(child, "rb") as handle:
                    os.fsync(handle.fileno())
        # The folder may have changed while this one was built: check again, with the new
        # folder's names at hand for a pre-marker folder (see written_by_ptm_before_markers).
        if path.exists() or path.is_symlink():
            check(new=tmp)
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.rmdir(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        # A refusal is never a full disk, however little space is left.
        free = None if isinstance(exc, OutputExistsError) else _disk_full(exc, path.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        if free is not None:
            raise DiskFullError(path, free, hint) from exc
        raise


def save_safetensors(
    tensors: Mapping[str, Tensor], path: str | Path, metadata: Mapping[str, str] | None = None
) -> Path:
    """Write ``tensors`` as a safetensors file atomically, with a plain file's permissions.

    Args:
        tensors: name -> tensor (made contiguous here).
        path: the target file.
        metadata: string metadata for the header.

    Returns:
        ``path``.

    Raises:
        DiskFullError: the file system filled up; ``path`` is unchanged.
    """
    from safetensors.torch import save

    data = save(
        {k: v.contiguous() for k, v in tensors.items()}, dict(metadata) if metadata else None
    )
    return atomic_write_bytes(path, data)
