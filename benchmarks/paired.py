"""Paired, interleaved timing: the only fair comparison on a shared, noisy machine."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class PairedTiming:
    """Per-step seconds of two implementations measured alternately in one process.

    Attributes:
        ours: seconds per step of ptm.
        theirs: seconds per step of the reference.
        ratios: per-pair ``theirs / ours`` (> 1 means ptm is faster).
    """

    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    def summary(self, units_per_step: float) -> dict[str, Any]:
        """min/median/max throughput of each side and the median paired speed-up."""

        def stats(times: list[float]) -> dict[str, float]:
            return {
                "min": units_per_step / max(times),
                "median": units_per_step / statistics.median(times),
                "max": units_per_step / min(times),
            }

        return {
            "ptm": stats(self.ours),
            "reference": stats(self.theirs),
            "speedup_median": statistics.median(self.ratios),
            "pairs": len(self.ratios),
        }


def time_paired(
    ours: Callable[[], Any],
    theirs: Callable[[], Any],
    *,
    warmup: int = 2,
    pairs: int = 10,
    sync: Callable[[], None] = lambda: None,
) -> PairedTiming:
    """Alternate ``ours`` and ``theirs`` (swapping who goes first each pair) after warm-up."""
    for _ in range(warmup):
        ours()
        theirs()
    sync()
    result = PairedTiming()
    for i in range(pairs):
        order = [(ours, result.ours), (theirs, result.theirs)]
        if i % 2:
            order.reverse()
        for fn, sink in order:
            start = time.perf_counter()
            fn()
            sync()
            sink.append(time.perf_counter() - start)
        result.ratios.append(result.theirs[-1] / result.ours[-1])
    return result


class CpuSteal:
    """The share of this machine's CPU time the hypervisor gave to other guests ("steal"
    in ``/proc/stat``) between :meth:`start` and :meth:`share`; ``None`` off Linux.

    On a shared virtual machine a stolen vCPU stalls every multi-threaded kernel until its
    slowest thread returns, so timings with several threads vary with it: the benchmarks
    print it beside their tables.
    """

    def __init__(self) -> None:
        self._start = self._read()

    @staticmethod
    def _read() -> tuple[int, int] | None:
        try:
            fields = Path("/proc/stat").read_text().splitlines()[0].split()
        except (OSError, IndexError):
            return None
        if fields[0] != "cpu" or len(fields) < 9:
            return None
        ticks = [int(value) for value in fields[1:9]]  # user .. steal
        return ticks[7], sum(ticks)

    def share(self) -> float | None:
        end = self._read()
        if self._start is None or end is None or end[1] == self._start[1]:
            return None
        return (end[0] - self._start[0]) / (end[1] - self._start[1])


def machine_name() -> str:
    """The CPU as users know it (``/proc/cpuinfo``'s model name, core count, bf16 units).

    ``platform.processor()`` says only ``x86_64`` on Linux, and CPU speed ratios depend on
    the model: bf16 autocast is several times faster on a CPU with AVX-512 BF16 or AMX.
    """
    import os
    import platform

    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    units = [
        name
        for flag, name in (("avx512_bf16", "AVX-512 BF16"), ("amx_bf16", "AMX"))
        if flag in flags
    ]
    parts = [model or platform.processor() or platform.machine(), f"{os.cpu_count()} vCPUs"]
    return ", ".join(parts + ([" + ".join(units)] if units else []))


def steal_note(share: float | None) -> list[str]:
    """Markdown lines that report :class:`CpuSteal`'s share (none when unknown or zero)."""
    if not share:
        return []
    return [
        "",
        f"CPU steal during the run: {100 * share:.0f}% of this machine's CPU time went to "
        "other guests of the host (`/proc/stat`); with several threads each parallel kernel "
        "waits for its slowest, stolen, thread.",
    ]
