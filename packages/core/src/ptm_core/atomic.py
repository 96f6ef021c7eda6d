"""Atomic writes: a reader sees the old file/directory or the new one, never half of one."""

from __future__ import annotations

import contextlib
import errno
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


class DiskFullError(OSError):
    """A write failed because its file system is full; nothing was replaced.

    Args:
        path: the file or directory that was being written.
        free: bytes still free on that file system.
    """

    def __init__(self, path: Path, free: int) -> None:
        super().__init__(
            errno.ENOSPC,
            f"no space left on the device while writing {path} ({free / 2**20:.1f} MiB free); "
            "nothing was replaced. Free some space or write somewhere else (e.g. another "
            "trainer.output_dir), then run again: training resumes from its last complete "
            "checkpoint",
        )
        self.path = path


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
def atomic_file(path: str | Path) -> Iterator[Path]:
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
            raise DiskFullError(path, free) from exc
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
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Build a directory under a temporary name, then move it to ``path``.

    Yields the temporary directory to fill. On success an existing ``path`` is replaced
    as a whole; on an exception the temporary directory is removed and ``path`` is left
    untouched. Temporary names start with ``.`` and end with ``.tmp`` so scanners skip them.
    Files are published with the mode a plain ``open()`` gives (safetensors writes 0600).

    Raises:
        DiskFullError: the file system filled up while the directory was written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp creates 0700
    try:
        yield tmp
        for child in tmp.rglob("*"):
            if child.is_file():
                _plain_file_mode(child)
                with open(child, "rb") as handle:
                    os.fsync(handle.fileno())
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.rmdir(old)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException as exc:
        free = _disk_full(exc, path.parent)  # before the cleanup frees space again
        shutil.rmtree(tmp, ignore_errors=True)
        if free is not None:
            raise DiskFullError(path, free) from exc
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
