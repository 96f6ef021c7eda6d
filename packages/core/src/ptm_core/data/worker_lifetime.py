"""Bind a worker process's life to its parent's, so a ``kill -9`` leaves no orphan behind.

A ``ProcessPoolExecutor`` worker that waits for its next task blocks on a pipe whose other
end its siblings also hold, so it never sees the parent go: after a ``kill -9`` of
``ptm prepare --workers 2`` the two workers and multiprocessing's resource tracker (kept
alive by the workers' copies of its pipe) ran on for minutes. Two lines of defence:

- on Linux the kernel sends ``SIGKILL`` when the parent dies (``prctl(PR_SET_PDEATHSIG)``,
  as :mod:`flows.server` does for the Prefect server). The signal follows the death of the
  thread that started the worker, which for the pool is the thread that submits tasks;
  it lives as long as the pool;
- everywhere, a daemon thread polls ``os.getppid()`` and ends the process once it changes
  (the worker was re-parented: its parent is gone).

A worker holds no state worth saving: a shard is written under a temporary name and only a
complete one is renamed into place, so killing it outright loses nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading

#: Seconds between two checks of the watchdog thread.
WATCH_INTERVAL = 0.5

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int, *, interval: float = WATCH_INTERVAL) -> None:
    """End this process as soon as ``parent_pid`` (its parent) is gone.

    Call it first thing in a worker (a pool's initializer).

    Args:
        parent_pid: The process that started this one.
        interval: Seconds between the watchdog thread's checks.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    # The parent may have died before prctl took effect: the worker is re-parented already.
    if os.getppid() != parent_pid:
        os._exit(1)
    watchdog = threading.Thread(
        target=_watch, args=(parent_pid, interval), name="ptm-parent-watchdog", daemon=True
    )
    watchdog.start()


def _watch(parent_pid: int, interval: float) -> None:
    stop = threading.Event()
    while not stop.wait(interval):
        if os.getppid() != parent_pid:
            # os._exit, not SystemExit: the main thread may be blocked on the pool's pipe.
            os._exit(1)


__all__ = ["WATCH_INTERVAL", "die_with_parent"]
