"""Run a command and poll the resident memory of its whole process tree (psutil).

Used by the data-pipeline benchmarks, where preparation forks worker processes and
training may start DataLoader workers: the peak of one process would miss them.

Three peaks are kept: the RSS of the command's own process, the RSS summed over the
tree, and the PSS (proportional set size) summed over the tree. The RSS sum counts pages
shared by several processes (copy-on-write pages after a fork, the same memory-mapped file
read by two workers) once per process, so it is an upper bound; the PSS sum splits each
shared page between its processes, so it is what the tree costs the machine.
Polled every ``interval`` seconds: a spike shorter than that can be missed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass
class Measured:
    """What :func:`run_measured` saw.

    Attributes:
        returncode: exit status; ``None`` when killed at the time limit.
        wall_s: seconds from start to exit (or to the kill).
        peak_rss_mb: peak RSS of the command's own process, MiB.
        peak_tree_rss_mb: peak of the summed RSS of the process and its descendants, MiB.
        peak_tree_pss_mb: peak of the summed PSS of the process and its descendants, MiB.
        timed_out: killed at ``timeout``.
        killed_at_mb: the tree's PSS when it was killed at ``rss_limit_mb`` (else ``None``).
        first_line_s: seconds until ``watch`` first held a complete line (``None`` if never).
        output: the last 4,000 characters of stdout and stderr together.
    """

    returncode: int | None
    wall_s: float
    peak_rss_mb: float
    peak_tree_rss_mb: float
    peak_tree_pss_mb: float
    timed_out: bool = False
    killed_at_mb: float | None = None
    first_line_s: float | None = None
    output: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON form, without the output."""
        out = asdict(self)
        out.pop("output")
        return out


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``: the peak RSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def reset_peak_rss() -> int:
    """Reset this process's peak RSS (``VmHWM``) to its current RSS (``/proc/self/clear_refs``);
    returns that RSS, KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return status_kb("VmRSS")


def _tree_memory(proc: psutil.Process) -> tuple[int, int, int]:
    """(RSS of ``proc``, summed RSS, summed PSS of ``proc`` and every descendant), bytes."""
    try:
        children = proc.children(recursive=True)
    except psutil.Error:
        return 0, 0, 0
    own = rss = pss = 0
    for i, member in enumerate([proc, *children]):
        with contextlib.suppress(psutil.Error):
            info = member.memory_full_info()
            rss += info.rss
            pss += info.pss
            if i == 0:
                own = info.rss
    return own, rss, pss


def _has_line(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b"\n" in handle.read(1 << 16)
    except OSError:
        return False


def run_measured(
    command: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float | None = None,
    interval: float = 0.1,
    watch: Path | None = None,
    log: Path | None = None,
    rss_limit_mb: float | None = None,
) -> Measured:
    """Run ``command`` to completion (or ``timeout``), polling its tree's RSS.

    Args:
        command: the argv.
        env: the environment (default: this one).
        cwd: working directory.
        timeout: seconds after which the whole tree is killed (``returncode`` ``None``).
        interval: polling period, seconds.
        watch: a file whose first complete line is timed (``first_line_s``), e.g. a
            training run's ``metrics.jsonl``.
        log: file that receives the full stdout + stderr (default: a temporary file).
        rss_limit_mb: kill the tree when its summed PSS passes this (the machine is
            shared: a run that would swap it is stopped and reported as ``killed_at_mb``).

    Returns:
        The :class:`Measured` figures.
    """
    log_path = log or Path(f"/tmp/ptm-bench/logs/run-{os.getpid()}-{time.time_ns()}.log")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    peak_own = peak_tree = peak_pss = 0
    first_line = None
    with log_path.open("wb") as sink:
        start = time.perf_counter()
        popen = subprocess.Popen(
            list(command),
            env=env,
            cwd=cwd,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc = psutil.Process(popen.pid)
        timed_out = False
        killed_at = None
        while popen.poll() is None:
            own, tree, pss = _tree_memory(proc)
            peak_own, peak_tree = max(peak_own, own), max(peak_tree, tree)
            peak_pss = max(peak_pss, pss)
            elapsed = time.perf_counter() - start
            if watch is not None and first_line is None and _has_line(watch):
                first_line = elapsed
            if rss_limit_mb is not None and pss / 2**20 > rss_limit_mb:
                killed_at = pss / 2**20
                _kill_tree(proc)
                popen.wait()
                break
            if timeout is not None and elapsed > timeout:
                timed_out = True
                _kill_tree(proc)
                popen.wait()
                break
            time.sleep(interval)
        wall = time.perf_counter() - start
    if watch is not None and first_line is None and _has_line(watch):
        first_line = wall
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return Measured(
        returncode=None if timed_out or killed_at else popen.returncode,
        wall_s=wall,
        peak_rss_mb=peak_own / 2**20,
        peak_tree_rss_mb=peak_tree / 2**20,
        peak_tree_pss_mb=peak_pss / 2**20,
        timed_out=timed_out,
        killed_at_mb=killed_at,
        first_line_s=first_line,
        output=text[-4000:],
    )


def _kill_tree(proc: psutil.Process) -> None:
    """SIGKILL ``proc`` and its descendants (the ones this benchmark started)."""
    try:
        victims = [*proc.children(recursive=True), proc]
    except psutil.Error:
        victims = [proc]
    for victim in victims:
        with contextlib.suppress(psutil.Error):
            victim.kill()


def status_mb(field_name: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``RssAnon``, ``RssFile``), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field_name}")
