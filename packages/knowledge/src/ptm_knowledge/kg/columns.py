"""Compact string columns: one UTF-8 byte buffer plus offsets, instead of a str per row.

A KG of a million entities holds five million short strings (ids, names, types, aliases,
descriptions). As Python objects they cost about 60 bytes each plus a list slot; here they
cost their UTF-8 bytes plus 8 bytes of offset, and a column can be memory-mapped from the
KG cache (:mod:`ptm_knowledge.kg.cache`). A row is decoded when it is read.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np


class StringColumn(Sequence[str]):
    """An immutable sequence of strings stored as ``data[offsets[i]:offsets[i + 1]]``.

    Args:
        data: ``(B,)`` uint8, the UTF-8 bytes of every row back to back.
        offsets: ``(N + 1,)`` int64, ``offsets[0] == 0`` and ``offsets[-1] == len(data)``.
    """

    def __init__(self, data: np.ndarray, offsets: np.ndarray) -> None:
        self.data = data
        self.offsets = offsets

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> StringColumn:
        """Build a column from any iterable of strings."""
        builder = StringColumnBuilder()
        for text in strings:
            builder.append(text)
        return builder.finish()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"row {index} of a column of {n}")
        start, stop = int(self.offsets[index]), int(self.offsets[index + 1])
        return bytes(self.data[start:stop]).decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        # Decoding the whole buffer once and cutting it is ~10x faster than row by row, but
        # offsets are in bytes: cut the bytes, then decode each row.
        data = bytes(self.data)
        bounds = self.offsets.tolist()
        for start, stop in itertools.pairwise(bounds):
            yield data[start:stop].decode("utf-8")

    def tolist(self) -> list[str]:
        """Every row as a Python list (for small columns)."""
        return list(self)


class StringColumnBuilder:
    """Appends strings into a growing byte buffer; :meth:`finish` gives the column."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._offsets = array("q", [0])

    def append(self, text: str) -> None:
        self._data += text.encode("utf-8")
        self._offsets.append(len(self._data))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def finish(self) -> StringColumn:
        data = np.frombuffer(bytes(self._data), dtype=np.uint8)
        offsets = np.frombuffer(self._offsets.tobytes(), dtype=np.int64).copy()
        return StringColumn(data, offsets)
