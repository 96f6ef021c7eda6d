"""Draining Prefect's queued events before the temporary server stops: it waits while the
queue moves and drops the rest when it stalls, so a finished command never hangs at exit."""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from typing import Any, ClassVar

import pytest

from flows.server import _discard_queued, _drain_while_moving


class FakeInstance:
    """A queue service whose worker takes ``rate`` items a second (0 = a dead server)."""

    def __init__(self, items: int, rate: float) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()
        for i in range(items):
            self._queue.put_nowait(i)
        self.rate = rate
        self.future: concurrent.futures.Future[bool] = concurrent.futures.Future()

    def _drain(self, at_exit: bool = False) -> concurrent.futures.Future[bool]:
        self._queue.put_nowait(None)

        def work() -> None:
            while True:
                if self.rate == 0:
                    time.sleep(0.01)
                    if self.future.done():
                        return
                    if self._queue.qsize() == 1 and self._queue.queue[0] is None:
                        self._queue.get_nowait()
                        self.future.set_result(True)
                        return
                    continue
                item = self._queue.get()
                if item is None:
                    self.future.set_result(True)
                    return
                time.sleep(1 / self.rate)

        threading.Thread(target=work, daemon=True).start()
        return self.future


class FakeWorker:
    _instance_lock = threading.Lock()
    _instance_cache_lock = threading.Lock()
    _instances: ClassVar[dict[Any, FakeInstance]] = {}


def test_a_slow_but_moving_queue_is_drained_whole(capsys: pytest.CaptureFixture[str]) -> None:
    instance = FakeInstance(items=40, rate=100)  # 0.4 s of work, stall limit 0.15 s
    FakeWorker._instances = {"a": instance}
    _drain_while_moving(FakeWorker, stall=0.15)
    assert instance.future.result(timeout=1) is True
    assert instance._queue.qsize() == 0
    assert "not sent" not in capsys.readouterr().err


def test_a_stalled_queue_is_dropped_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    instance = FakeInstance(items=25, rate=0)  # the server takes nothing
    FakeWorker._instances = {"a": instance}
    started = time.perf_counter()
    _drain_while_moving(FakeWorker, stall=0.2)
    assert time.perf_counter() - started < 5
    assert "25 FakeWorker records were not sent" in capsys.readouterr().err
    assert instance.future.result(timeout=2) is True  # the stop marker let it exit


def test_discard_keeps_the_stop_marker() -> None:
    items: queue.Queue[Any] = queue.Queue()
    for value in (1, 2, None):
        items.put_nowait(value)
    assert _discard_queued(items) == 2
    assert items.get_nowait() is None and items.empty()
