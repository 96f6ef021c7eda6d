"""Progress of a long command: a bar on a terminal, plain periodic log lines elsewhere.

On a terminal (stderr is a TTY) :class:`Progress` draws a tqdm bar with the count, the
rate and the ETA, redrawn in place; log records printed meanwhile go above the bar instead
of breaking it. Anywhere else (CI, Prefect's logs, a pipe, a file) a bar is noise, so it
logs one plain line every ``PTM_PROGRESS_SECONDS`` seconds (default 30) and one at the end::

    INFO ptm_core.progress: train: 120/400 steps (30%), 4.1 steps/s, ETA 0:01:08

``PTM_PROGRESS=bar`` / ``lines`` / ``off`` forces one display whatever stderr is.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack
from typing import Any, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")

MODES = ("auto", "bar", "lines", "off")
DEFAULT_SECONDS = 30.0
MODE_VARIABLE = "PTM_PROGRESS"
SECONDS_VARIABLE = "PTM_PROGRESS_SECONDS"


class ProgressSettingError(ValueError):
    """``PTM_PROGRESS`` or ``PTM_PROGRESS_SECONDS`` holds a value this module cannot use."""


def progress_mode() -> str:
    """``bar``, ``lines`` or ``off``: what ``PTM_PROGRESS`` asks for, else by stderr.

    Raises:
        ProgressSettingError: ``PTM_PROGRESS`` is not one of ``auto bar lines off``.
    """
    mode = os.environ.get(MODE_VARIABLE, "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise ProgressSettingError(
            f"{MODE_VARIABLE}={mode!r} is not a progress display; use one of {', '.join(MODES)}"
        )
    if mode != "auto":
        return mode
    isatty = getattr(sys.stderr, "isatty", None)
    return "bar" if isatty is not None and isatty() else "lines"


def progress_seconds() -> float:
    """Seconds between two plain progress lines (``PTM_PROGRESS_SECONDS``, default 30).

    Raises:
        ProgressSettingError: the variable is not a number >= 0.
    """
    text = os.environ.get(SECONDS_VARIABLE, "").strip()
    if not text:
        return DEFAULT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        raise ProgressSettingError(
            f"{SECONDS_VARIABLE}={text!r} is not a number of seconds >= 0; "
            f"e.g. {SECONDS_VARIABLE}=10 (0 = a line at every update)"
        )
    return seconds


def check_progress_settings() -> None:
    """Raise :class:`ProgressSettingError` if ``PTM_PROGRESS*`` holds a bad value."""
    progress_mode()
    progress_seconds()


def plural_of(unit: str) -> str:
    """``step`` -> ``steps``, ``batch`` -> ``batches``: English's regular plural."""
    return f"{unit}es" if unit.endswith(("s", "x", "ch", "sh")) else f"{unit}s"


def format_duration(seconds: float) -> str:
    """``3725.2`` -> ``"1:02:05"``; ``"?"`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class Progress(AbstractContextManager["Progress"]):
    """Count of work done towards a total, shown as a bar or as periodic log lines.

    Args:
        desc: what is counted, first word of every line (``"train"``, ``"link"``).
        total: the count at the end, or ``None`` when unknown (no ETA then).
        unit: the unit, singular (``"step"``); lines say ``steps/s``.
        initial: the count already done (a resumed run), not counted in the rate.
        enabled: ``False`` shows nothing (e.g. ``trainer.progress=false``, other ranks).
        log: the logger of the plain lines (this module's by default; a flow passes
            Prefect's run logger so the lines reach the run's logs in the UI).

    Example:
        >>> with Progress("link", total=len(docs), unit="document") as progress:
        ...     for doc in docs:
        ...         link(doc)
        ...         progress.update()
    """

    def __init__(
        self,
        desc: str,
        total: int | None,
        unit: str = "it",
        *,
        initial: int = 0,
        enabled: bool = True,
        log: logging.Logger | logging.LoggerAdapter[Any] | None = None,
    ) -> None:
        self.desc, self.total, self.unit = desc, total, unit
        self.count = self.initial = initial
        self.mode = progress_mode() if enabled else "off"
        self.every = progress_seconds() if self.mode == "lines" else DEFAULT_SECONDS
        self.log = log or logger
        self.status = ""
        self._start = self._last_line = time.perf_counter()
        self._bar: Any = None
        self._redirect = ExitStack()
        if self.mode == "bar":
            from tqdm.auto import tqdm
            from tqdm.contrib.logging import logging_redirect_tqdm

            self._bar = tqdm(
                total=total,
                initial=initial,
                desc=desc,
                unit=unit,
                dynamic_ncols=True,
                file=sys.stderr,
            )
            # Log lines (the trainer's step lines) print above the bar, not through it.
            self._redirect.enter_context(logging_redirect_tqdm())

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; logs a plain line when the period has passed."""
        self.count += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "lines":
            now = time.perf_counter()
            if now - self._last_line >= self.every:
                self._last_line = now
                self.log.info("%s", self.line(now))

    def set_status(self, **values: Any) -> None:
        """Latest figures to show after the count (``loss=0.41``), on the bar and lines."""
        self.status = ", ".join(f"{key} {value}" for key, value in values.items())
        if self._bar is not None:
            self._bar.set_postfix(values, refresh=False)

    def rate(self, now: float | None = None) -> float:
        """Units per second since this display started (a resumed run's count excluded)."""
        elapsed = (now if now is not None else time.perf_counter()) - self._start
        return (self.count - self.initial) / elapsed if elapsed > 0 else 0.0

    def line(self, now: float | None = None, *, done: str | None = None) -> str:
        """The plain line: ``desc: count/total units (pct), rate units/s, ETA h:mm:ss``;
        with ``done`` (the run's duration), ``done in h:mm:ss`` in place of the ETA."""
        rate = self.rate(now)
        plural = plural_of(self.unit)
        if self.total:
            count = f"{self.count}/{self.total} {plural} ({100 * self.count / self.total:.0f}%)"
            eta = (self.total - self.count) / rate if rate > 0 else float("inf")
            tail = f", ETA {format_duration(eta)}"
        else:
            count, tail = f"{self.count} {plural}", ""
        speed = (
            f"{rate:.3g} {plural}/s" if rate >= 1 or rate == 0 else f"{1 / rate:.3g} s/{self.unit}"
        )
        if done is not None:
            tail = f", done in {done}"
        status = f" ({self.status})" if self.status else ""
        return f"{self.desc}: {count}, {speed}{tail}{status}"

    def close(self) -> None:
        """End the bar, or log the final plain line (with the whole run's rate)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
            self._redirect.close()
        elif self.mode == "lines" and self.count > self.initial:
            self.log.info("%s", self.line(done=format_duration(self._elapsed())))
        self.mode = "off"

    def _elapsed(self) -> float:
        return time.perf_counter() - self._start

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def batch_starts(total: int, batch_size: int, desc: str, unit: str = "row") -> Iterator[int]:
    """``range(0, total, batch_size)`` that shows the rows done as :class:`Progress`.

    Each start is counted once the loop body of the batch before it has run, so the rate
    and the ETA are those of the work, not of the slicing.

    Args:
        total: rows in all.
        batch_size: rows per batch.
        desc: what the display calls the work (``"evaluate"``).
        unit: what a row is (``"row"``, ``"example"``).
    """
    with Progress(desc, total, unit) as progress:
        for first in range(0, total, batch_size):
            yield first
            progress.update(min(batch_size, total - first))


def track(items: Iterable[T], desc: str, total: int | None, unit: str = "it") -> Iterator[T]:
    """The items of ``items``, each counted as :class:`Progress` once the caller is done with it.

    Args:
        items: what to go through (a batch iterator).
        desc: what the display calls the work (``"score heads"``).
        total: how many items there are, if known (for the ETA).
        unit: what an item is (``"batch"``).
    """
    with Progress(desc, total, unit) as progress:
        for item in items:
            yield item
            progress.update()
