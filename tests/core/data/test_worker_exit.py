"""DataLoader workers forked inside a Prefect flow run exit cleanly."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

from ptm_core.data.batches import PretrainingBatches


@pytest.fixture
def parent_thread_exit_that_fails_in_children() -> Iterator[None]:
    # What Prefect's log/event services register (threading._register_atexit): a callback
    # that asserts its own thread's state, which a forked child does not have. Before the
    # workers dropped it, a worker's exit raised and the DataLoader failed with "worker
    # exited unexpectedly with exit code 1" (tests/flows ran a flow earlier in the session).
    parent = os.getpid()

    def drain() -> None:
        assert os.getpid() == parent, "the service thread does not exist in this process"

    threading._register_atexit(drain)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        registered = threading._threading_atexits  # type: ignore[attr-defined]
        registered[:] = [c for c in registered if getattr(c, "func", None) is not drain]


@pytest.mark.usefixtures("parent_thread_exit_that_fails_in_children")
def test_workers_exit_cleanly_with_the_parents_thread_exits_registered() -> None:
    examples = [{"input_ids": [i + 5, i + 6]} for i in range(40)]
    batches = PretrainingBatches(examples, 4, pad_id=0, seed=1, num_workers=2)
    built = [b["input_ids"].tolist() for b in batches.iter_indices(0, range(10))]
    expected = [b["input_ids"].tolist() for b in (batches.batch(0, i) for i in range(10))]
    assert built == expected
