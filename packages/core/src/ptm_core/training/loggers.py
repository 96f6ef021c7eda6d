"""Experiment trackers fed the trainer's metrics: TensorBoard and MLflow, as optional extras.

Both are :class:`~ptm_core.training.protocols.TrainerCallback` s: ``on_log`` receives the
exact line the trainer wrote to ``metrics.jsonl``, so the tracker and the file hold the same
numbers at the same steps. On resume the trainer rewinds ``metrics.jsonl`` to the
checkpoint's step and re-trains the steps after it; the loggers rewind too, so no step is
recorded twice (TensorBoard: a ``purge_step`` that makes readers drop the stale events;
MLflow: the same run is continued and steps it already holds are not sent again).

Turn them on with ``trainer.loggers=[tensorboard,mlflow]``; the trainer builds them on
rank 0 with :func:`build_loggers`.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import math
import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text
from ptm_core.training.config import LOGGERS, TrainerConfig
from ptm_core.training.protocols import TrainerCallback

logger = logging.getLogger(__name__)

# The run's whole config (e.g. the composed Hydra config), logged as MLflow params when set.
_RUN_CONFIG: ContextVar[Mapping[str, Any] | None] = ContextVar("ptm_run_config", default=None)
# MLflow refuses values longer than this (mlflow.utils.validation.MAX_PARAM_VAL_LENGTH).
_MAX_PARAM_LENGTH = 6000
# MLflow's log_batch takes at most this many params / metrics per call.
_PARAMS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000
MLFLOW_RUN_FILE = "mlflow_run.json"


class MissingTrackerError(ImportError):
    """A logger was asked for whose package is not installed; the message names the extra."""


def require_module(module: str, extra: str, setting: str) -> Any:
    """Import ``module`` or raise :class:`MissingTrackerError` naming the extra to install.

    Args:
        module: the module to import (``"torch.utils.tensorboard"``).
        extra: the ptm-core extra that installs it (``"tensorboard"``).
        setting: the setting that asked for it, for the message.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingTrackerError(
            f"{setting} needs the {extra!r} package, which is not installed ({exc}); "
            f'install it with: pip install "ptm-core[{extra}]" (or remove {extra} from '
            "trainer.loggers)"
        ) from None


@contextlib.contextmanager
def run_config(config: Mapping[str, Any]) -> Iterator[None]:
    """Within this block, trackers log ``config`` (flattened) as the run's parameters.

    The trainer only knows its own settings; a flow that composed the whole config (model,
    data, objective) wraps the training call in this so MLflow records all of it.

    Args:
        config: nested mapping, e.g. ``OmegaConf.to_container(cfg, resolve=True)``.
    """
    token = _RUN_CONFIG.set(config)
    try:
        yield
    finally:
        _RUN_CONFIG.reset(token)


def flatten_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}``; lists become their JSON text.

    Args:
        config: a nested mapping of settings.
        prefix: prepended to every key (with a dot).

    Returns:
        Flat string parameters, each value cut to MLflow's length limit.
    """
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten_params(value, name))
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        flat[name] = text[:_MAX_PARAM_LENGTH]
    return flat


# How fast and how it runs, not how well it learns: the ``system/`` group.
SYSTEM_KEYS = frozenset({"epoch", "tokens_per_s", "data_wait_share"})
TAG_GROUPS = ("train", "dev", "system")


def tracker_tag(key: str) -> str:
    """The tracker's name for a ``metrics.jsonl`` key, in one of three groups.

    TensorBoard and MLflow sort tags by name, so a group prefix keeps what belongs
    together in one panel: ``dev/...`` (held-out scores, e.g. the fine-tuning dev metrics)
    stays as it is; ``system/...`` takes speed and bookkeeping (``epoch``,
    ``tokens_per_s``, ``data_wait_share``, memory figures); everything else is a training
    figure under ``train/...`` (``loss``, ``lr``, ``grad_norm``, ``mlm/accuracy``).
    ``metrics.jsonl`` keeps the bare keys.

    Args:
        key: a key of a metrics line (``"loss"``, ``"mlm/accuracy"``, ``"dev/f1"``).

    Returns:
        ``"train/loss"``, ``"train/mlm/accuracy"``, ``"dev/f1"``, ``"system/epoch"``.
    """
    if key.split("/", 1)[0] in TAG_GROUPS:
        return key
    if key.startswith("heldout_"):
        return f"dev/{key}"
    if key in SYSTEM_KEYS or "memory" in key or key.endswith(("_mib", "_bytes")):
        return f"system/{key}"
    return f"train/{key}"


def _scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numbers by tracker tag, without ``step`` (every tracker's x axis)."""
    out: dict[str, float] = {}
    for key, value in record.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        out[tracker_tag(key)] = float(value)
    return out


class TensorBoardLogger(TrainerCallback):
    """Writes every metrics line as TensorBoard scalars (``torch.utils.tensorboard``).

    One scalar per key of the line at the line's ``step``, named by :func:`tracker_tag`
    (``train/loss``, ``train/mlm/accuracy``, ``system/tokens_per_s``, ...). The writer opens at :meth:`on_train_begin` with ``purge_step = step + 1``: on
    resume from step ``s``, TensorBoard's readers drop every older event past ``s`` (those
    steps are trained and logged again), and a fresh run (``s = 0``) hides an earlier run's
    events in the same directory.

    Args:
        log_dir: directory for the event files.

    Raises:
        MissingTrackerError: tensorboard is not installed (``pip install
            "ptm-core[tensorboard]"``).
    """

    def __init__(self, log_dir: str | Path) -> None:
        tensorboard = require_module("torch.utils.tensorboard", "tensorboard", "trainer.loggers")
        self._writer_class = tensorboard.SummaryWriter
        self.log_dir = Path(log_dir)
        self._writer: Any = None

    def on_train_begin(self, step: int, output_dir: Path) -> None:
        """Open the event file; events past ``step`` from an earlier attempt get purged."""
        self.close()
        self._writer = self._writer_class(log_dir=str(self.log_dir), purge_step=step + 1)

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        """Add every number of the metrics line at ``step``."""
        if self._writer is None:  # used without the trainer's on_train_begin
            self.on_train_begin(step - 1, self.log_dir)
        for key, value in _scalars(record).items():
            self._writer.add_scalar(key, value, global_step=step)
        self._writer.flush()

    def on_train_end(self, step: int) -> None:
        """Flush and close the event file."""
        self.close()

    def close(self) -> None:
        """Close the writer if it is open."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


class MLflowLogger(TrainerCallback):
    """Logs the run to MLflow: its config as params, every metrics line as step metrics
    (named by :func:`tracker_tag`, as in TensorBoard).

    The run id is kept in ``<output_dir>/mlflow_run.json``. A resumed training continues
    that run and skips the steps it already holds (they are re-trained bit for bit, so the
    values would repeat); a fresh training starts a new run. At the end the run is marked
    finished, and ``metrics.jsonl`` is attached as an artifact when ``log_artifacts``.

    A ``file:`` store (the default, ``file:<output_dir>/mlruns``) needs no server; MLflow 3
    refuses it unless ``MLFLOW_ALLOW_FILE_STORE=true``, which this logger sets for file
    stores only (``sqlite:///mlflow.db`` or an ``http://`` server are used as they are).

    Args:
        tracking_uri: the tracking store (``file:/path``, ``sqlite:///mlflow.db``,
            ``http://host:5000``); ``None`` = ``MLFLOW_TRACKING_URI``, else ``./mlruns``.
        experiment: experiment name (created when missing).
        params: settings to log as params (nested; flattened with dots). The block of
            :func:`run_config`, when active, is logged too.
        log_artifacts: attach ``metrics.jsonl`` to the run at the end of training (the
            newest checkpoint's path is a tag, ``ptm.last_checkpoint``, either way).

    Raises:
        MissingTrackerError: mlflow is not installed (``pip install "ptm-core[mlflow]"``).
    """

    def __init__(
        self,
        tracking_uri: str | None,
        experiment: str,
        params: Mapping[str, Any] | None = None,
        *,
        log_artifacts: bool = True,
    ) -> None:
        self._mlflow = require_module("mlflow", "mlflow", "trainer.loggers")
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "mlruns"
        self.experiment = experiment
        self.params = dict(params or {})
        self.log_artifacts = log_artifacts
        self.run_id: str | None = None
        self._client: Any = None
        self._skip_through = 0  # steps <= this are already in the run
        self._output_dir: Path | None = None

    def _make_client(self) -> Any:
        if is_file_store(self.tracking_uri):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri)

    def on_train_begin(self, step: int, output_dir: Path) -> None:
        """Start (fresh) or continue (resumed) the run; log the params once."""
        self._output_dir = Path(output_dir)
        self._client = client = self._make_client()
        run_file = self._output_dir / MLFLOW_RUN_FILE
        previous = _read_run_id(run_file) if step > 0 else None
        if previous is not None:
            try:
                run = client.get_run(previous)
            except self._mlflow.exceptions.MlflowException:
                run = None  # the store was moved or wiped: start a new run
            if run is not None:
                self.run_id = previous
                client.update_run(previous, status="RUNNING")
                history = client.get_metric_history(previous, tracker_tag("loss"))
                self._skip_through = max((m.step for m in history), default=0)
                return
        experiment = client.get_experiment_by_name(self.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else client.create_experiment(self.experiment)
        )
        run = client.create_run(experiment_id, run_name=self._output_dir.name)
        self.run_id = run.info.run_id
        self._skip_through = step  # a run that starts mid-way records from here
        atomic_write_text(
            run_file,
            json.dumps({"run_id": self.run_id, "tracking_uri": self.tracking_uri}) + "\n",
        )
        params = dict(flatten_params(self.params))
        extra = _RUN_CONFIG.get()
        if extra is not None:
            params.update(flatten_params(extra, "config"))
        items = [self._mlflow.entities.Param(k, v) for k, v in sorted(params.items())]
        for start in range(0, len(items), _PARAMS_PER_BATCH):
            client.log_batch(self.run_id, params=items[start : start + _PARAMS_PER_BATCH])

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        """Log every finite number of the metrics line at ``step`` (once per step)."""
        if self.run_id is None:
            raise RuntimeError("MLflowLogger.on_log before on_train_begin: no run is open")
        if step <= self._skip_through:
            return
        import time

        now = int(time.time() * 1000)
        metrics = [
            self._mlflow.entities.Metric(key, value, now, step)
            for key, value in _scalars(record).items()
            if math.isfinite(value)  # MLflow stores NaN/inf badly; metrics.jsonl keeps them
        ]
        for start in range(0, len(metrics), _METRICS_PER_BATCH):
            self._client.log_batch(self.run_id, metrics=metrics[start : start + _METRICS_PER_BATCH])
        self._skip_through = step

    def on_save(self, step: int, path: Path) -> None:
        """Tag the run with its newest checkpoint."""
        if self.run_id is not None:
            self._client.set_tag(self.run_id, "ptm.last_checkpoint", str(path))

    def on_train_end(self, step: int) -> None:
        """Mark the run finished; attach ``metrics.jsonl`` when configured."""
        if self.run_id is None:
            return
        metrics = self._output_dir / "metrics.jsonl" if self._output_dir else None
        if self.log_artifacts and metrics is not None and metrics.exists():
            self._client.log_artifact(self.run_id, str(metrics))
        self._client.set_terminated(self.run_id, status="FINISHED")


def is_file_store(uri: str) -> bool:
    """Whether an MLflow tracking URI is a local directory (``file:`` or a plain path)."""
    return uri.startswith("file:") or ":" not in uri.split("/", 1)[0]


def _read_run_id(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text(encoding="utf-8"))["run_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def build_loggers(config: TrainerConfig, params: Mapping[str, Any] | None = None) -> list[object]:
    """The trackers ``config.loggers`` names, ready to hand to the trainer as callbacks.

    Args:
        config: trainer settings (``loggers``, ``tensorboard_dir``, ``mlflow_*``).
        params: extra settings to log as MLflow params besides ``trainer.*``.

    Returns:
        One callback per name, in the order given.

    Raises:
        MissingTrackerError: a named tracker's package is not installed.
        ValueError: an unknown name (the valid ones are listed).
    """
    output_dir = Path(config.output_dir)
    callbacks: list[object] = []
    for name in config.loggers:
        if name == "tensorboard":
            callbacks.append(
                TensorBoardLogger(config.tensorboard_dir or output_dir / "tensorboard")
            )
        elif name == "mlflow":
            uri = (
                config.mlflow_tracking_uri
                or os.environ.get("MLFLOW_TRACKING_URI")
                or (output_dir / "mlruns").resolve().as_uri()
            )
            callbacks.append(
                MLflowLogger(
                    uri,
                    config.mlflow_experiment or output_dir.resolve().name,
                    {"trainer": config.to_dict(), **dict(params or {})},
                )
            )
        else:
            raise ValueError(
                f"TrainerConfig.loggers: unknown logger {name!r}; valid: {', '.join(LOGGERS)}"
            )
    return callbacks


def log_after_training(config: TrainerConfig, step: int, metrics: Mapping[str, Any]) -> None:
    """Add figures computed after training (the dev metrics of a fine-tuning run) to the
    trackers ``config.loggers`` named, at ``step``, beside the training curves.

    TensorBoard gets a new event file in the same folder (nothing is purged); MLflow gets
    the run of ``mlflow_run.json``. Call it on rank 0 only, after :meth:`Trainer.fit`.

    Args:
        config: the trainer settings of the run that just trained.
        step: the run's last step, the x position of the figures.
        metrics: name -> number; names go through :func:`tracker_tag` (``dev/f1``).

    Raises:
        MissingTrackerError: a named tracker's package is not installed.
    """
    scalars = _scalars(metrics)
    if not scalars:
        return
    output_dir = Path(config.output_dir)
    if "tensorboard" in config.loggers:
        tensorboard = require_module("torch.utils.tensorboard", "tensorboard", "trainer.loggers")
        writer = tensorboard.SummaryWriter(
            log_dir=str(config.tensorboard_dir or output_dir / "tensorboard")
        )
        for tag, value in scalars.items():
            writer.add_scalar(tag, value, global_step=step)
        writer.close()
    run_id = _read_run_id(output_dir / MLFLOW_RUN_FILE)
    if "mlflow" in config.loggers and run_id is not None:
        mlflow = require_module("mlflow", "mlflow", "trainer.loggers")
        uri = json.loads((output_dir / MLFLOW_RUN_FILE).read_text(encoding="utf-8"))["tracking_uri"]
        if is_file_store(uri):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        import time

        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[
                mlflow.entities.Metric(tag, value, now, step)
                for tag, value in scalars.items()
                if math.isfinite(value)
            ],
        )
