"""A small model registry: a champion pointer and the history of candidates, on disk.

MLflow's model registry can mirror it (:class:`MLflowRegistryPeer`): with
``PTM_MLFLOW_REGISTRY`` set, every promotion also creates a version of an MLflow
registered model and moves its ``champion`` alias there.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from filelock import FileLock, Timeout

from ptm_core.atomic import atomic_write_text, file_in_the_way

# Seconds to wait for another process's registry update: each update is a few small JSON
# writes, so a lock held longer than this belongs to a hung process.
LOCK_TIMEOUT_S = 120.0
# Turns the MLflow peer on: "1"/"true" (model "ptm-champion") or the registered model's name.
MLFLOW_REGISTRY_ENV = "PTM_MLFLOW_REGISTRY"
DEFAULT_MLFLOW_MODEL = "ptm-champion"
CHAMPION_ALIAS = "champion"

logger = logging.getLogger(__name__)


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
        mlflow_version: the MLflow model version created for a promotion (when the MLflow
            peer is on and the registration worked), else ``None``.
    """

    promoted: bool
    reason: str
    champion: dict[str, Any]
    mlflow_version: str | None = None


class MLflowRegistryPeer:
    """MLflow's model registry as a mirror of ptm's champion registry.

    Each promotion becomes an MLflow run (experiment = the model name; the candidate's
    metrics, its ``model_dir``, the metric and reason) and a new version of the registered
    model ``model_name`` whose source is the model directory; the ``champion`` alias points
    at it. Rejected candidates stay in ptm's ``history.json`` only. ptm's registry stays
    the source of truth: a failed MLflow call is logged and the promotion stands.

    MLflow's file store (``file:`` URIs) holds a model registry too (checked with
    mlflow-skinny 3.17); MLflow 3 refuses file stores unless ``MLFLOW_ALLOW_FILE_STORE``
    is true, which this class sets for ``file:`` URIs only.

    Args:
        tracking_uri: tracking and registry store (``file:/path``, ``sqlite:///mlflow.db``,
            ``http://host:5000``).
        model_name: the registered model's name.

    Raises:
        ImportError: mlflow is not installed (``pip install "ptm-core[mlflow]"``).
    """

    def __init__(self, tracking_uri: str, model_name: str = DEFAULT_MLFLOW_MODEL) -> None:
        from ptm_core.training.loggers import is_file_store, require_module

        self.mlflow = require_module("mlflow", "mlflow", MLFLOW_REGISTRY_ENV)
        self.tracking_uri = tracking_uri
        self.model_name = model_name
        if is_file_store(tracking_uri):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")

    @classmethod
    def from_env(cls, root: str | Path) -> MLflowRegistryPeer | None:
        """The peer ``PTM_MLFLOW_REGISTRY`` asks for, or ``None`` when it is unset/off.

        The store is ``MLFLOW_REGISTRY_URI``, else ``MLFLOW_TRACKING_URI``, else
        ``file:<root>/mlruns`` (beside ``champion.json``).
        """
        value = os.environ.get(MLFLOW_REGISTRY_ENV, "").strip()
        if value.lower() in ("", "0", "false", "no", "off"):
            return None
        name = DEFAULT_MLFLOW_MODEL if value.lower() in ("1", "true", "yes", "on") else value
        uri = (
            os.environ.get("MLFLOW_REGISTRY_URI")
            or os.environ.get("MLFLOW_TRACKING_URI")
            or (Path(root) / "mlruns").resolve().as_uri()
        )
        return cls(uri, name)

    def client(self) -> Any:
        """An ``MlflowClient`` on this store (tracking and registry)."""
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)

    def register(self, record: dict[str, Any]) -> str:
        """Record a promoted candidate; return the new model version (``"1"``, ``"2"``...).

        Args:
            record: the registry record (``model_dir``, ``metric``, ``value``, ``metrics``,
                ``reason``).
        """
        # MLflow's file registry reads model versions through a client on the *global*
        # tracking URI (mlflow/store/model_registry/file_store.py, a TODO there), which
        # defaults to sqlite:///mlflow.db in the working directory: point it at our store.
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        os.environ["MLFLOW_TRACKING_URI"] = self.tracking_uri
        try:
            return self._register(record)
        finally:
            if previous is None:
                os.environ.pop("MLFLOW_TRACKING_URI", None)
            else:
                os.environ["MLFLOW_TRACKING_URI"] = previous

    def _register(self, record: dict[str, Any]) -> str:
        entities = self.mlflow.entities
        client = self.client()
        experiment = client.get_experiment_by_name(self.model_name)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(self.model_name)
        )
        model_dir = str(Path(record["model_dir"]).resolve())
        run = client.create_run(experiment_id, run_name=Path(model_dir).name)
        run_id = run.info.run_id
        now = int(datetime.now(UTC).timestamp() * 1000)
        metrics = [
            entities.Metric(key, float(value), now, 0)
            for key, value in record.get("metrics", {}).items()
            if isinstance(value, (int, float)) and math.isfinite(float(value))
        ]
        params = [
            entities.Param("model_dir", model_dir),
            entities.Param("metric", str(record["metric"])),
        ]
        tags = [entities.RunTag("ptm.reason", str(record.get("reason", "")))]
        client.log_batch(run_id, metrics=metrics, params=params, tags=tags)
        client.set_terminated(run_id)
        try:
            client.get_registered_model(self.model_name)
        except self.mlflow.exceptions.MlflowException:
            client.create_registered_model(
                self.model_name, description="ptm champion models (flows/registry.py)"
            )
        version = client.create_model_version(
            self.model_name,
            source=model_dir,
            run_id=run_id,
            tags={"ptm.metric": str(record["metric"]), "ptm.value": repr(record["value"])},
            description=str(record.get("reason", "")),
        )
        client.set_registered_model_alias(self.model_name, CHAMPION_ALIAS, version.version)
        return str(version.version)


class ModelRegistry:
    """Champion pointer (``champion.json``) and history (``history.json``) in a directory.

    Every write goes through a temporary file and a rename, so a crash leaves either the
    old or the new file, never a torn one. Every read-modify-write holds ``registry.lock``
    (a file lock), so processes that update the registry at the same time lose nothing.

    Args:
        root: the registry directory (created on first write).
        lock_timeout: seconds to wait for another process's update before giving up.
        mlflow: the MLflow registry to mirror promotions to: ``"env"`` (default) builds
            it from ``PTM_MLFLOW_REGISTRY`` (off when unset), ``None`` turns it off.
    """

    def __init__(
        self,
        root: str | Path,
        lock_timeout: float = LOCK_TIMEOUT_S,
        mlflow: MLflowRegistryPeer | Literal["env"] | None = "env",
    ) -> None:
        self.root = Path(root)
        self._lock = FileLock(self.root / "registry.lock", timeout=lock_timeout)
        self.mlflow = MLflowRegistryPeer.from_env(self.root) if isinstance(mlflow, str) else mlflow

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
        blocker = file_in_the_way(self.root)
        if blocker is not None:
            raise ValueError(
                f"--registry {self.root}: {blocker} is a file, and a registry is a folder; "
                "give a folder path"
            )
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
            mlflow_version = self._mirror(record) if promoted else None
            # History first: a crash in between leaves the candidate recorded, so the
            # retrain flow never resumes (or overwrites) its folder.
            self._write(self.history_path, [*self.history(), record])
            if promoted:
                self._write(self.champion_path, record)
        champion = record if promoted else current
        assert champion is not None
        return Decision(
            promoted=promoted, reason=reason, champion=champion, mlflow_version=mlflow_version
        )

    def _mirror(self, record: dict[str, Any]) -> str | None:
        """Register a promotion in MLflow (when on); the record notes the version or error."""
        if self.mlflow is None:
            return None
        try:
            version = self.mlflow.register(record)
        except Exception as exc:  # the mirror must never undo a promotion
            logger.warning(
                "%s: the promotion of %s stands, but MLflow (%s) did not record it: %s",
                self.champion_path,
                record["model_dir"],
                self.mlflow.tracking_uri,
                exc,
            )
            record["mlflow_error"] = str(exc)
            return None
        record["mlflow"] = {
            "tracking_uri": self.mlflow.tracking_uri,
            "model": self.mlflow.model_name,
            "version": version,
        }
        return version

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
