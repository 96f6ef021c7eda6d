"""The pretrain flow in the Prefect UI: trainer step lines in the run's logs, the loss
curve as an embedded image, and TensorBoard events through `trainer.loggers`."""

from __future__ import annotations

import asyncio
import base64
import re
from pathlib import Path
from typing import Any

import pytest
from flow_settings import FAST

from flows.artifacts import read_metrics

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def _logs_and_artifacts(flow_run_id: Any) -> tuple[list[Any], dict[str, str]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        LogFilter,
        LogFilterFlowRunId,
    )

    async with get_client() as client:
        logs = await client.read_logs(
            LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])), limit=200
        )
        artifacts = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return logs, {str(a.key): str(a.data) for a in artifacts}


def _embedded_png(text: str) -> bytes:
    found = re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert found, "no embedded PNG"
    return base64.b64decode(found.group(1))


def test_pretrain_flow_logs_trainer_steps_and_embeds_the_loss_curve(tmp_path: Path) -> None:
    from prefect.logging.handlers import APILogHandler

    from flows.pretrain import pretrain

    state = pretrain(
        [
            *FAST,
            "trainer.max_steps=10",
            "trainer.loggers=[tensorboard]",
            f"trainer.output_dir={tmp_path}",
        ],
        return_state=True,
    )
    summary = state.result()
    APILogHandler().flush()  # logs go to the API in the background
    logs, artifacts = asyncio.run(_logs_and_artifacts(state.state_details.flow_run_id))

    # The trainer's step lines, attributed to the `train` task run of this flow run.
    # (The trainer's other INFO lines, e.g. "Saved <checkpoint>", reach the API too when an
    # earlier test left the logger at INFO; only the step lines are counted.)
    step_lines = [
        log
        for log in logs
        if log.name == "ptm_core.training.trainer" and log.message.startswith("step ")
    ]
    records = read_metrics(summary["metrics_path"])
    assert [r["step"] for r in records] == [5, 10]
    assert len(step_lines) == 2, [log.message for log in logs]
    for record in records:
        line = next(
            log for log in step_lines if log.message.startswith(f"step {record['step']}/10:")
        )
        assert f"loss {record['loss']:.4g}" in line.message
        assert line.task_run_id is not None
    assert all(log.level == 20 for log in step_lines)

    # The loss curve as pictures: embedded in the metrics markdown and as an image artifact.
    png = Path(summary["loss_curve"]).read_bytes()
    assert png[:8] == PNG_MAGIC
    markdown = artifacts["pretraining-metrics"]
    assert "![loss curve of bert_tiny](data:image/png;base64," in markdown
    assert _embedded_png(markdown) == png
    assert _embedded_png(artifacts["pretraining-loss-curve"]) == png

    # trainer.loggers through Hydra: TensorBoard events beside metrics.jsonl.
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
