"""Reading ``.zst`` input that fails on truncation, and the errors a damaged stream raises.

``zstandard``'s ``stream_reader`` returns what it decoded and then a clean end of file when
the input stops inside a frame, so a truncated ``.jsonl.zst`` read as a shorter (or empty)
corpus. :class:`ZstdRaw` decompresses frame by frame and raises at the end of the file when
a frame is open. :data:`STREAM_ERRORS` is what a damaged gzip or zstd stream raises while
it is read, so the reader can name the file and the line reached.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path
from typing import Any

#: Raised while reading a damaged gzip stream (``EOFError``, ``gzip.BadGzipFile`` is an
#: ``OSError``, ``zlib.error``) or zstd stream (:class:`ZstdRaw` raises ``OSError`` and
#: :class:`TruncatedStreamError`).
STREAM_ERRORS: tuple[type[BaseException], ...] = (EOFError, OSError, zlib.error)


class TruncatedStreamError(EOFError):
    """A compressed stream ended inside a frame."""


class ZstdRaw(io.RawIOBase):
    """A ``.zst`` file decompressed frame by frame, failing on a truncated last frame.

    Args:
        path: The file.
        zstandard: The ``zstandard`` module (an optional dependency, imported by the caller).
    """

    def __init__(self, path: Path, zstandard: Any) -> None:
        self._file = open(path, "rb")  # noqa: SIM115 (closed in close())
        self._zstd = zstandard
        self._decompressor = zstandard.ZstdDecompressor().decompressobj()
        self._pending = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._file.read(2**20)
            if not chunk:
                if self._in_frame:
                    raise TruncatedStreamError("the file ends inside a Zstandard frame")
                return 0
            self._feed(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def _feed(self, chunk: bytes) -> None:
        while chunk:
            self._in_frame = True
            try:
                self._pending += self._decompressor.decompress(chunk)
            except self._zstd.ZstdError as exc:
                raise OSError(f"corrupt Zstandard data: {exc}") from None
            if not self._decompressor.eof:
                return
            chunk = self._decompressor.unused_data
            self._decompressor = self._zstd.ZstdDecompressor().decompressobj()
            self._in_frame = False

    def close(self) -> None:
        self._file.close()
        super().close()


__all__ = ["STREAM_ERRORS", "TruncatedStreamError", "ZstdRaw"]
