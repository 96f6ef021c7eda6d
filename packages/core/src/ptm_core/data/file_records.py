"""Records of a data file validated once, then read per index from their byte offsets."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from ptm_core.data.layouts import LazyRows


class FileRecords(LazyRows):
    """A lazy sequence over one file: subclasses give ``__len__`` and ``_build(index)``.

    A reader validates the file in one streaming pass and keeps only where each record
    starts (a few bytes a record); ``_build`` then reads a record through :meth:`handle`.
    The file is opened on first use and again in each process, so the sequence pickles
    into DataLoader workers without an open handle.

    Args:
        path: the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._handle: IO[bytes] | None = None
        self._pid = -1

    def handle(self) -> IO[bytes]:
        """The file, opened for binary reads in this process."""
        if self._handle is None or self._pid != os.getpid():  # a DataLoader worker reopens
            self._handle, self._pid = self.path.open("rb"), os.getpid()
        return self._handle

    def read_at(self, offset: int, length: int) -> bytes:
        """``length`` bytes of the file from ``offset``."""
        handle = self.handle()
        handle.seek(offset)
        return handle.read(length)

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "_handle": None, "_pid": -1}

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}, {len(self)} records)"


__all__ = ["FileRecords"]
