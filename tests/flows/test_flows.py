"""Prefect flows on tiny data: pretrain, evaluate, retrain (promote and refuse), deploy."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flow_settings import FAST

from flows.artifacts import read_metrics
from flows.registry import ModelRegistry

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

CORPUS = Path(__file__).resolve().parents[2] / "data_specs" / "text_corpus" / "sample"


def test_pretrain_flow_publishes_metrics_and_loss_curve(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.pretrain import pretrain

    summary = pretrain([*FAST, "trainer.max_steps=10", f"trainer.output_dir={tmp_path}"])
    assert Path(summary["encoder_dir"], "model.safetensors").exists()
    png = Path(summary["loss_curve"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["step"] for r in read_metrics(summary["metrics_path"])] == [5, 10]

    async def latest_artifacts() -> dict[str, tuple[str, str]]:
        async with get_client() as client:
            artifacts = await client.read_latest_artifacts()
            return {str(a.key): (str(a.type), str(a.data)) for a in artifacts}

    import asyncio

    artifacts = asyncio.run(latest_artifacts())
    kind, markdown = artifacts["pretraining-metrics"]
    assert "| metric | step 5 | step 10 |" in markdown and "loss_curve.png" in markdown
    # The curve alone is a markdown image (scaled to the panel), not an image artifact,
    # whose data URL Prefect prints as one unbreakable line under the image.
    kind, curve = artifacts["pretraining-loss-curve"]
    assert kind == "markdown" and curve.startswith("![loss curve of ")


def test_evaluate_flow_reports_model_and_random_baseline(tmp_path: Path) -> None:
    from flows.evaluate import evaluate
    from flows.pretrain import pretrain

    summary = pretrain(
        [
            *FAST,
            "trainer.max_steps=60",
            "trainer.learning_rate=2e-3",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = evaluate(summary["encoder_dir"], corpus=str(CORPUS / "corpus.txt"))
    report = Path(result["report"]).read_text()
    assert "random init" in report and "accuracy" in report
    assert result["model"]["predictions"] == result["baseline"]["predictions"] > 0
    assert result["model"]["loss"] < result["baseline"]["loss"]


def test_retrain_promotes_a_better_model_and_refuses_a_worse_one(tmp_path: Path) -> None:
    from flows.retrain import retrain

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    text = (CORPUS / "corpus.txt").read_text()
    documents = text.split("\n\n")
    (corpus / "part1.txt").write_text("\n\n".join(documents[:20]) + "\n")
    registry_dir = tmp_path / "registry"
    eval_corpus = str(CORPUS / "corpus.txt")
    common = [*FAST, "trainer.learning_rate=2e-3"]

    first = retrain(str(corpus), str(registry_dir), [*common, "trainer.max_steps=20"], eval_corpus)
    assert first["status"] == "promoted"
    again = retrain(str(corpus), str(registry_dir), common, eval_corpus)
    assert again["status"] == "no new data"

    (corpus / "part2.txt").write_text("\n\n".join(documents[20:]) + "\n")
    better = retrain(str(corpus), str(registry_dir), [*common, "trainer.max_steps=60"], eval_corpus)
    assert better["status"] == "promoted", better["reason"]
    champion = ModelRegistry(registry_dir).champion()
    assert champion is not None and champion["model_dir"] == better["candidate"]

    (corpus / "part3.txt").write_text(documents[0] + "\n")
    # A learning rate of 5 wrecks the continued model: it must not replace the champion.
    worse = retrain(
        str(corpus),
        str(registry_dir),
        [*common, "trainer.max_steps=5", "trainer.learning_rate=5.0", "trainer.warmup_ratio=0"],
        eval_corpus,
    )
    assert worse["status"] == "rejected", worse["reason"]
    registry = ModelRegistry(registry_dir)
    assert registry.champion()["model_dir"] == better["candidate"]
    assert [h["promoted"] for h in registry.history()] == [True, True, False]


def test_pretrain_flow_killed_mid_run_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    overrides = [
        *FAST,
        "trainer.max_steps=150",
        "trainer.save_every=10",
        f"trainer.output_dir={out}",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "flow", "pretrain", *overrides],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    try:
        while not (out / "checkpoints" / "step-00000020").exists():
            assert process.poll() is None, "the flow ended before it could be killed"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    done = [r["step"] for r in read_metrics(out / "metrics.jsonl")]
    assert done and done[-1] < 150

    from flows.pretrain import pretrain

    summary = pretrain(overrides)
    steps = [r["step"] for r in read_metrics(summary["metrics_path"])]
    assert steps == list(range(5, 151, 5))  # no step logged twice, none missing
    state = json.loads((Path(summary["last_checkpoint"]) / "trainer_state.json").read_text())
    assert state["step"] == 150


def test_deployment_has_the_cron_schedule(tmp_path: Path) -> None:
    import asyncio
    from uuid import UUID

    from prefect.client.orchestration import get_client

    from flows.deploy import deploy

    deployment_id = deploy(
        "retrain",
        cron="0 3 * * *",
        name="nightly",
        parameters={"corpus": str(CORPUS), "registry_dir": str(tmp_path / "registry")},
    )

    async def read() -> tuple[list[str], dict]:
        async with get_client() as client:
            deployment = await client.read_deployment(UUID(deployment_id))
            return [s.schedule.cron for s in deployment.schedules], deployment.parameters

    crons, parameters = asyncio.run(read())
    assert crons == ["0 3 * * *"]
    assert parameters["corpus"] == str(CORPUS)
