"""A small model registry: a champion pointer and the history of candidates, on disk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ptm_core.atomic import atomic_write_text

# Seconds to wait for another process's registry update: each update is a few small JSON
# writes, so a lock held longer than this belongs to a hung process.
LOCK_TIMEOUT_S = 120.0


class LockHeldError(ValueError):
    """Another process holds a lock that this operation needs.

    A ``ValueError`` so that the ``ptm`` command line reports it as one line.
    """


@dataclass
class Decision:
    """Outcome of :meth:`ModelRegistry.consider`.

    Attributes:
        promoted: whether the candidate became the champion.
        reason: one sentence for logs and reports.
        champion: the champion record after the decision.
    """

    promoted: bool
    reason: str
    champion: dict[str, Any]


class ModelRegistry:
    """Champion pointer (``champion.json``) and history (``history.json``) in a directory.

    Every write goes through a temporary file and a rename, so a crash leaves either the
    old or the new file, never a torn one. Every read-modify-write holds ``registry.lock``
    (a file lock), so processes that update the registry at the same time lose nothing.

    Args:
        root: the registry directory (created on first write).
        lock_timeout: seconds to wait for another process's update before giving up.
    """

    def __init__(self, root: str | Path, lock_timeout: float = LOCK_TIMEOUT_S) -> None:
        self.root = Path(root)
        self._lock = FileLock(self.root / "registry.lock", timeout=lock_timeout)

    @property
    def champion_path(self) -> Path:
        return self.root / "champion.json"

    @property
    def history_path(self) -> Path:
        return self.root / "history.json"

    @property
    def lock_path(self) -> Path:
        return Path(self._lock.lock_file)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the registry's file lock (re-entrant within this object).

        Raises:
            LockHeldError: another process held it for longer than ``lock_timeout``.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except Timeout:
            raise LockHeldError(
                f"{self.lock_path}: another process has held the registry lock for "
                f"{self._lock.timeout:.0f} s; wait for it, or remove the lock file only if no "
                "ptm process uses this registry"
            ) from None
        try:
            yield
        finally:
            self._lock.release()

    def champion(self) -> dict[str, Any] | None:
        """The current champion record, or ``None``."""
        return self._read(self.champion_path, None)

    def history(self) -> list[dict[str, Any]]:
        """Every candidate considered, oldest first."""
        return self._read(self.history_path, [])

    def rescore_champion(self, value: float) -> None:
        """Record the champion's score on the data the next candidate is judged on."""
        with self.locked():
            current = self.champion()
            if current is None:
                raise ValueError(f"{self.champion_path}: there is no champion to re-score")
            self._write(self.champion_path, {**current, "rescored": float(value)})

    def consider(
        self,
        model_dir: str | Path,
        metrics: dict[str, float],
        *,
        metric: str,
        higher_is_better: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> Decision:
        """Promote ``model_dir`` if its ``metric`` is not worse than the champion's.

        The comparison must use scores computed on the same data with the same seed; the
        caller (the retrain flow) re-scores the champion for that reason.

        Raises:
            KeyError: ``metric`` is not in ``metrics``.
            ValueError: ``model_dir`` is the champion itself (a candidate trained over the
                champion's files would be compared with itself).
        """
        if metric not in metrics:
            raise KeyError(f"metric {metric!r} not among {sorted(metrics)}")
        record = {
            "model_dir": str(model_dir),
            "metric": metric,
            "value": float(metrics[metric]),
            "metrics": metrics,
            "time": datetime.now(UTC).isoformat(timespec="seconds"),
            **(extra or {}),
        }
        with self.locked():
            current = self.champion()
            if current is None:
                promoted, reason = True, "no champion yet"
            else:
                if _same_path(current["model_dir"], model_dir):
                    raise ValueError(
                        f"{model_dir} is the champion itself; a candidate must be trained in a "
                        "folder of its own, never over the champion's files"
                    )
                old = float(current.get("rescored", current["value"]))
                new = record["value"]
                promoted = new >= old if higher_is_better else new <= old
                comparison = "not worse than" if promoted else "worse than"
                reason = f"{metric} {new:.4f} is {comparison} the champion's {old:.4f}"
            record["promoted"] = promoted
            record["reason"] = reason
            # History first: a crash in between leaves the candidate recorded, so the
            # retrain flow never resumes (or overwrites) its folder.
            self._write(self.history_path, [*self.history(), record])
            if promoted:
                self._write(self.champion_path, record)
        champion = record if promoted else current
        assert champion is not None
        return Decision(promoted=promoted, reason=reason, champion=champion)

    def _read(self, path: Path, default: Any) -> Any:
        if not path.exists():
            return default
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"{path}:{exc.lineno}: the registry file is not valid JSON ({exc.msg}); "
                "restore it from history.json or delete it to start a new registry"
            ) from None

    def _write(self, path: Path, data: Any) -> None:
        atomic_write_text(path, json.dumps(data, indent=2) + "\n")


def _same_path(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()
