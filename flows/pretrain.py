"""The `pretrain` flow: any `experiment=` preset, in process or through torchrun."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prefect import flow, task

from flows.artifacts import (
    embedded_image,
    metrics_by_step,
    plot_loss_curve,
    publish_markdown,
    read_metrics,
)
from flows.config import compose_config
from flows.config_schema import typed
from flows.end_table import key_metrics, print_end_table
from flows.runner import run_composed
from ptm_core.training import find_latest_checkpoint


def launch_torchrun(overrides: list[str], devices: int) -> None:
    """Run ``ptm pretrain`` in ``devices`` processes on this machine through torchrun.

    Each rank composes the same config and joins the process group the trainer finds in
    its environment; rank 0 writes metrics, checkpoints and ``final/``.
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={devices}",
        "-m",
        "flows.cli",
        "pretrain",
        *overrides,
    ]
    print("launching: " + " ".join(command))
    completed = subprocess.run(command, check=False)
    if completed.returncode != 0:
        raise RuntimeError(
            f"torchrun with {devices} processes failed (exit {completed.returncode}); "
            "see the ranks' output above. Re-running resumes from the last checkpoint."
        )


@contextmanager
def package_logs_to_prefect(name: str = "ptm_core", level: int = logging.INFO) -> Iterator[None]:
    """Send the ``name`` logger's records (the trainer's per-step lines) to the run's logs.

    Inside a flow or task run, records of ``name`` at ``level`` and above go to the Prefect
    API, attributed to the current run, as ``PREFECT_LOGGING_EXTRA_LOGGERS=ptm_core`` would
    do for the whole process; they still reach the console through the root logger.
    Outside a run, or when that setting already names ``name``, nothing changes.

    Args:
        name: the logger to forward (``ptm_core``: every ptm-core module logs under it).
        level: the lowest level forwarded; the logger is lowered to it meanwhile.
    """
    from prefect.context import FlowRunContext, TaskRunContext
    from prefect.logging.handlers import APILogHandler
    from prefect.settings import get_current_settings

    task_run = TaskRunContext.get()
    flow_run = FlowRunContext.get()
    extra = get_current_settings().logging.extra_loggers
    extra_names = extra.split(",") if isinstance(extra, str) else list(extra or [])
    if (task_run is None and flow_run is None) or name in {n.strip() for n in extra_names}:
        yield
        return
    ids: dict[str, Any] = {}
    if task_run is not None:
        ids = {"flow_run_id": task_run.task_run.flow_run_id, "task_run_id": task_run.task_run.id}
    elif flow_run is not None and flow_run.flow_run is not None:
        ids = {"flow_run_id": flow_run.flow_run.id}

    def attribute(record: logging.LogRecord) -> bool:
        # Threads the trainer starts (batch prefetch) do not inherit Prefect's context.
        for key, value in ids.items():
            if getattr(record, key, None) is None:
                setattr(record, key, value)
        return True

    handler = APILogHandler(level=level)
    handler.addFilter(attribute)
    target = logging.getLogger(name)
    previous = target.level
    if target.getEffectiveLevel() > level:
        target.setLevel(level)
    target.addHandler(handler)
    try:
        yield
    finally:
        target.removeHandler(handler)
        target.setLevel(previous)


@task(name="train")
def train(overrides: list[str]) -> dict[str, Any]:
    """Run the configured recipe; resumes from the run's last checkpoint if there is one.

    The trainer's per-step lines (logger ``ptm_core``) appear in the task run's logs.
    """
    with package_logs_to_prefect():
        return _train(overrides)


def _train(overrides: list[str]) -> dict[str, Any]:
    cfg = compose_config(overrides)
    devices = typed(cfg.trainer).devices
    if devices > 1 and "WORLD_SIZE" not in os.environ:
        launch_torchrun(overrides, devices)
        output_dir = Path(cfg.trainer.output_dir)
        records = read_metrics(output_dir / "metrics.jsonl")
        latest = find_latest_checkpoint(output_dir / "checkpoints")
        return {
            "experiment": str(cfg.experiment_name),
            "output_dir": str(output_dir),
            "encoder_dir": str(output_dir / "final"),
            "metrics_path": str(output_dir / "metrics.jsonl"),
            "last_checkpoint": str(latest) if latest else None,
            "final_metrics": records[-1] if records else {},
        }
    from omegaconf import OmegaConf

    from ptm_core.training.loggers import run_config

    config = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(config, dict)
    with run_config({str(k): v for k, v in config.items()}):  # MLflow params: the whole config
        result = run_composed(cfg)
    return {
        "experiment": str(cfg.experiment_name),
        "output_dir": str(result.output_dir),
        "encoder_dir": str(result.encoder_dir),
        "metrics_path": str(result.metrics_path),
        "last_checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
        "final_metrics": dict(result.final_metrics),
    }


def training_artifacts(summary: dict[str, Any]) -> dict[str, str]:
    """Draw the loss curve (``loss_curve.png`` beside the metrics) and return the markdown
    of the run's two artifacts: ``pretraining-metrics`` (paths, the curve, a table of each
    metric at a few steps) and ``pretraining-loss-curve`` (the curve alone).

    Both fit Prefect's artifact panel: a markdown image is scaled to the panel's width,
    and the table has one row per metric and at most
    :data:`~flows.artifacts.STEP_COLUMNS` step columns. (Prefect's image artifact would
    print its data URL as one unbreakable line of text under the image, wider than any
    panel.)
    """
    records = read_metrics(summary["metrics_path"])
    png = plot_loss_curve(records, Path(summary["output_dir"]) / "loss_curve.png")
    image = embedded_image(png, f"loss curve of {summary['experiment']}")
    metrics = (
        f"# Pre-training: {summary['experiment']}\n\n"
        f"- final encoder: `{summary['encoder_dir']}`\n"
        f"- checkpoint: `{summary['last_checkpoint']}`\n"
        f"- metrics: `{summary['metrics_path']}`\n"
        f"- loss curve: `{png}`\n\n" + image + "\n\n" + metrics_by_step(records)
    )
    return {"pretraining-metrics": metrics, "pretraining-loss-curve": image, "png": str(png)}


@task(name="publish-training-report")
def publish_training_report(summary: dict[str, Any]) -> str:
    """Loss-curve PNG next to the metrics, and the :func:`training_artifacts` published."""
    artifacts = training_artifacts(summary)
    what = summary["experiment"]
    publish_markdown("pretraining-metrics", artifacts["pretraining-metrics"], f"metrics of {what}")
    publish_markdown(
        "pretraining-loss-curve", artifacts["pretraining-loss-curve"], f"loss curve of {what}"
    )
    return artifacts["png"]


@flow(name="pretrain", log_prints=True)
def pretrain(overrides: list[str] | None = None) -> dict[str, Any]:
    """Pre-train with a Hydra-composed config.

    Args:
        overrides: Hydra overrides, e.g. ``["experiment=bert_tiny", "trainer.max_steps=50"]``.
            Re-running after a crash resumes from the last checkpoint of the same
            ``trainer.output_dir``.

    Returns:
        Paths (output dir, final encoder, checkpoint, metrics, loss curve) and final metrics.
    """
    summary = train(list(overrides or []))
    summary["loss_curve"] = publish_training_report(summary)
    print_end_table(
        f"pretrain {summary['experiment']}",
        key_metrics(summary["final_metrics"]),
        {
            "final encoder": summary["encoder_dir"],
            "checkpoint": summary["last_checkpoint"],
            "metrics": summary["metrics_path"],
            "loss curve": summary["loss_curve"],
        },
    )
    return summary
