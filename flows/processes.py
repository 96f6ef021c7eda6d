"""Which recorded process still runs: a pid together with its start time, so that a pid
the system reused for another process is never taken for (or signalled as) ours."""

from __future__ import annotations


def started_at(pid: int) -> float | None:
    """Creation time of process ``pid`` (tells a live process from a reused pid), or None."""
    try:
        import psutil  # ships with prefect-dask (through distributed)
    except ImportError:
        return None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except psutil.Error:
        return None


def is_running(pid: int, started: float) -> bool:
    """Whether ``pid`` is still the process that was created at ``started``."""
    now = started_at(pid)
    return now is not None and abs(now - started) < 1.0
