"""The `pretrain` flow: any `experiment=` preset, in process or through torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from prefect import flow, task

from flows.artifacts import markdown_table, plot_loss_curve, publish_markdown, read_metrics
from flows.config import compose_config
from flows.recipes import run_recipe
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


@task(name="train")
def train(overrides: list[str]) -> dict[str, Any]:
    """Run the configured recipe; resumes from the run's last checkpoint if there is one."""
    cfg = compose_config(overrides)
    devices = int(cfg.trainer.get("devices", 1))
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
    result = run_recipe(cfg)
    return {
        "experiment": str(cfg.experiment_name),
        "output_dir": str(result.output_dir),
        "encoder_dir": str(result.encoder_dir),
        "metrics_path": str(result.metrics_path),
        "last_checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
        "final_metrics": dict(result.final_metrics),
    }


@task(name="publish-training-report")
def publish_training_report(summary: dict[str, Any]) -> str:
    """Loss-curve PNG next to the metrics, and a markdown artifact with the metrics table."""
    records = read_metrics(summary["metrics_path"])
    png = plot_loss_curve(records, Path(summary["output_dir"]) / "loss_curve.png")
    columns = ["step", *sorted(k for k in (records[-1] if records else {}) if k != "step")]
    shown = records if len(records) <= 20 else records[:: max(1, len(records) // 20)]
    if records and shown[-1] is not records[-1]:
        shown = [*shown, records[-1]]
    markdown = (
        f"# Pre-training: {summary['experiment']}\n\n"
        f"- final encoder: `{summary['encoder_dir']}`\n"
        f"- checkpoint: `{summary['last_checkpoint']}`\n"
        f"- metrics: `{summary['metrics_path']}`\n"
        f"- loss curve: `{png}`\n\n" + markdown_table(shown, columns)
    )
    publish_markdown("pretraining-metrics", markdown, f"metrics of {summary['experiment']}")
    return str(png)


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
    print(f"pre-training done: encoder in {summary['encoder_dir']}")
    return summary
