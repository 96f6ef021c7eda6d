"""Running means between log lines, and the append-only ``metrics.jsonl`` file."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.data.lines import iter_lines

logger = logging.getLogger(__name__)


class MetricsWindow:
    """Sums and counts of scalars since the last log line.

    Tensors are summed on their device and only read back at :meth:`means`, so adding a
    value never forces a GPU sync.
    """

    def __init__(self) -> None:
        self._sums: dict[str, float | torch.Tensor] = {}
        self._counts: dict[str, int] = {}

    def add(self, name: str, value: float | torch.Tensor) -> None:
        """Add one observation of ``name``.

        Args:
            name: Metric name.
            value: A Python number or a 0-d tensor.
        """
        if isinstance(value, torch.Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"metric {name!r} has shape {tuple(value.shape)}; metrics must be scalars "
                    "(reduce them, e.g. with .mean(), in the model)."
                )
            value = value.detach().float().reshape(())
        else:
            value = float(value)
        self._sums[name] = self._sums.get(name, 0.0) + value
        self._counts[name] = self._counts.get(name, 0) + 1

    def add_all(self, values: Mapping[str, float | torch.Tensor]) -> None:
        """Add one observation of each metric in ``values``."""
        for name, value in values.items():
            self.add(name, value)

    def means(self) -> dict[str, float]:
        """Return the mean of every metric seen since the last reset."""
        return {name: float(total) / self._counts[name] for name, total in self._sums.items()}

    def reset(self) -> None:
        """Forget everything (called after each log line)."""
        self._sums.clear()
        self._counts.clear()

    def state_dict(self) -> dict[str, list[float]]:
        """Return ``{name: [sum, count]}`` so a resumed run logs the same means."""
        return {name: [float(total), self._counts[name]] for name, total in self._sums.items()}

    def load_state_dict(self, state: Mapping[str, list[float]]) -> None:
        """Restore sums and counts saved by :meth:`state_dict`."""
        self.reset()
        for name, (total, count) in state.items():
            self._sums[name] = float(total)
            self._counts[name] = int(count)


class MetricsLog:
    """``metrics.jsonl``: one JSON object per logged step, in step order, no repeats.

    Args:
        path: The file to append to (created on first write).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def truncate_after(self, step: int) -> None:
        """Drop lines with ``step`` greater than ``step`` (and any torn line from a crash).

        Called when a run starts, so that steps redone after a resume are not logged twice.
        The file is rewritten atomically.

        Args:
            step: The step the run restarts from (0 for a fresh run).
        """
        if not self.path.exists():
            return
        kept: list[str] = []
        torn = 0
        for _, line in iter_lines(self.path):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                line_step = int(record["step"])
            except (ValueError, KeyError, TypeError):
                torn += 1
                continue
            if line_step <= step:
                kept.append(line)
        if torn:
            logger.warning("Dropped %d unreadable line(s) from %s.", torn, self.path)
        atomic_write_text(self.path, "".join(f"{line}\n" for line in kept))

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record as a JSON line and flush it to disk.

        Args:
            record: JSON-serialisable values; must contain ``step``.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def last(self) -> dict[str, Any]:
        """The last record in the file (empty if there is none)."""
        records = self.read()
        return records[-1] if records else {}

    def read(self) -> list[dict[str, Any]]:
        """Return all records in the file (empty if it does not exist)."""
        if not self.path.exists():
            return []
        return [json.loads(line) for _, line in iter_lines(self.path) if line.strip()]
