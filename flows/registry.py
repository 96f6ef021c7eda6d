"""A small model registry: a champion pointer and the history of candidates, on disk."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text


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
    old or the new file, never a torn one.

    Args:
        root: the registry directory (created on first write).
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def champion_path(self) -> Path:
        return self.root / "champion.json"

    @property
    def history_path(self) -> Path:
        return self.root / "history.json"

    def champion(self) -> dict[str, Any] | None:
        """The current champion record, or ``None``."""
        return self._read(self.champion_path, None)

    def history(self) -> list[dict[str, Any]]:
        """Every candidate considered, oldest first."""
        return self._read(self.history_path, [])

    def rescore_champion(self, value: float) -> None:
        """Record the champion's score on the data the next candidate is judged on."""
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
        current = self.champion()
        if current is None:
            promoted, reason = True, "no champion yet"
        else:
            old = float(current.get("rescored", current["value"]))
            new = record["value"]
            promoted = new >= old if higher_is_better else new <= old
            comparison = "not worse than" if promoted else "worse than"
            reason = f"{metric} {new:.4f} is {comparison} the champion's {old:.4f}"
        record["promoted"] = promoted
        record["reason"] = reason
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
