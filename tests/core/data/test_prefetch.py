"""Batches built on a background thread come out as if built inline (issue #36)."""

from __future__ import annotations

import threading

import pytest

from ptm_core.data.prefetch import iter_prefetched


def test_items_come_in_order_built_off_the_calling_thread() -> None:
    builders: set[int] = set()

    def build(index: int) -> int:
        builders.add(threading.get_ident())
        return index * 10

    assert list(iter_prefetched(build, [3, 1, 2])) == [30, 10, 20]
    assert threading.get_ident() not in builders


def test_an_error_is_raised_at_its_position() -> None:
    def build(index: int) -> int:
        if index == 2:
            raise ValueError("row 2 is broken")
        return index

    seen = []
    with pytest.raises(ValueError, match="row 2 is broken"):
        for item in iter_prefetched(build, [0, 1, 2, 3]):
            seen.append(item)
    assert seen == [0, 1]


def test_closing_early_stops_the_thread() -> None:
    built: list[int] = []
    items = iter_prefetched(lambda i: built.append(i) or i, range(1000), depth=2)
    assert next(items) == 0
    items.close()
    assert len(built) < 10
    assert not any(t.name == "ptm-prefetch" for t in threading.enumerate())
