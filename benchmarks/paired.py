"""Paired, interleaved timing: the only fair comparison on a shared, noisy machine."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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
