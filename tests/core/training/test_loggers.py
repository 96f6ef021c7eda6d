"""TensorBoard and MLflow loggers: the same scalars as metrics.jsonl, no step twice on resume."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ptm_core.training import Trainer, TrainerCallback, TrainerConfig
from ptm_core.training.loggers import (
    MissingTrackerError,
    MLflowLogger,
    TensorBoardLogger,
    flatten_params,
    log_after_training,
    run_config,
    tracker_tag,
)


class Crash(Exception):
    """Stands in for a kill signal."""


class CrashAfterLog(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        if step == self.step:
            raise Crash


def _metrics(output_dir: str | Path) -> list[dict[str, Any]]:
    lines = (Path(output_dir) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _expected(records: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value)] of every number in the metrics lines, by tracker tag."""
    out: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        for key, value in record.items():
            if key != "step" and isinstance(value, (int, float)):
                out.setdefault(tracker_tag(key), []).append((record["step"], float(value)))
    return out


def _tensorboard_scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    accumulator.Reload()
    return {
        tag: [(event.step, event.value) for event in accumulator.Scalars(tag)]
        for tag in accumulator.Tags()["scalars"]
    }


def _assert_same(actual: dict, expected: dict) -> None:
    assert sorted(actual) == sorted(expected)
    for tag, points in expected.items():
        steps = [step for step, _ in actual[tag]]
        assert steps == [step for step, _ in points], tag
        # TensorBoard stores float32: equal to metrics.jsonl's float64 rounded to float32.
        np.testing.assert_array_equal(
            np.array([v for _, v in actual[tag]], dtype=np.float32),
            np.array([v for _, v in points], dtype=np.float32),
            err_msg=tag,
        )


def test_tensorboard_events_hold_the_metrics_jsonl_scalars(
    make_model, make_source, make_config
) -> None:
    config = make_config("tb", max_steps=12, log_every=3, loggers=["tensorboard"])
    Trainer(make_model(0), make_source(), config).fit()
    log_dir = Path(config.output_dir) / "tensorboard"
    assert list(log_dir.glob("events.out.tfevents.*"))
    expected = _expected(_metrics(config.output_dir))
    assert {"train/loss", "train/lr", "train/grad_norm", "train/accuracy"} <= set(expected)
    assert {"system/epoch", "system/tokens_per_s", "system/data_wait_share"} <= set(expected)
    assert [s for s, _ in expected["train/loss"]] == [3, 6, 9, 12]
    scalars = _tensorboard_scalars(log_dir)
    _assert_same(scalars, expected)
    # Read back from the event file: every tag is in one of the three groups.
    assert {tag.split("/")[0] for tag in scalars} == {"train", "system"}


def test_tracker_tags_group_train_dev_and_system() -> None:
    assert tracker_tag("loss") == "train/loss"
    assert tracker_tag("lr") == "train/lr"
    assert tracker_tag("grad_norm") == "train/grad_norm"
    assert tracker_tag("mlm/accuracy") == "train/mlm/accuracy"
    assert tracker_tag("dev/f1") == "dev/f1"
    assert tracker_tag("heldout_perplexity") == "dev/heldout_perplexity"
    for key in ("epoch", "tokens_per_s", "data_wait_share", "peak_memory_mib"):
        assert tracker_tag(key) == f"system/{key}"
    # TensorBoard makes a section of each prefix: loss and lr sit together under train/,
    # no longer between data_wait_share and epoch as in one flat, name-sorted list.
    sections: dict[str, list[str]] = {}
    for key in ("data_wait_share", "epoch", "loss", "lr"):
        group, _, name = tracker_tag(key).partition("/")
        sections.setdefault(group, []).append(name)
    assert sections == {"system": ["data_wait_share", "epoch"], "train": ["loss", "lr"]}


def test_dev_metrics_after_training_join_the_tensorboard_and_mlflow_runs(
    make_model, make_source, make_config, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    config = make_config(
        "dev", max_steps=6, log_every=3, loggers=["tensorboard", "mlflow"], mlflow_tracking_uri=uri
    )
    Trainer(make_model(0), make_source(), config).fit()
    log_after_training(config, 6, {"dev/accuracy": 0.75, "dev/loss": 0.5})
    scalars = _tensorboard_scalars(Path(config.output_dir) / "tensorboard")
    assert scalars["dev/accuracy"] == [(6, 0.75)]
    assert [s for s, _ in scalars["train/loss"]] == [3, 6]  # the training events stay
    run_id = json.loads((Path(config.output_dir) / "mlflow_run.json").read_text())["run_id"]
    metrics = _mlflow_client(uri).get_run(run_id).data.metrics
    assert metrics["dev/accuracy"] == 0.75 and "train/loss" in metrics


def test_tensorboard_after_a_resume_has_each_step_once(
    make_model, make_source, make_config
) -> None:
    settings = {"max_steps": 12, "log_every": 3, "save_every": 5, "loggers": ["tensorboard"]}
    config = make_config("tb-resume", **settings)
    with pytest.raises(Crash):  # steps 6 and 9 logged, the checkpoint is at step 5
        Trainer(make_model(0), make_source(), config, callbacks=[CrashAfterLog(9)]).fit()
    Trainer(make_model(0), make_source(), make_config("tb-resume", **settings)).fit()
    records = _metrics(config.output_dir)
    assert [r["step"] for r in records] == [3, 6, 9, 12]
    log_dir = Path(config.output_dir) / "tensorboard"
    assert len(list(log_dir.glob("events.out.tfevents.*"))) == 2  # one per attempt
    # The first attempt's steps 6 and 9 are purged; the re-trained ones stand.
    _assert_same(_tensorboard_scalars(log_dir), _expected(records))


def _mlflow_client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_mlflow_run_holds_the_metrics_and_the_params(
    make_model, make_source, make_config, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    config = make_config(
        "ml", max_steps=12, log_every=3, loggers=["mlflow"], mlflow_tracking_uri=uri
    )
    with run_config({"model": {"dim": 16}, "data": {"files": ["a.txt", "b.txt"]}}):
        Trainer(make_model(0), make_source(), config).fit()
    run_id = json.loads((Path(config.output_dir) / "mlflow_run.json").read_text())["run_id"]
    client = _mlflow_client(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "ml"
    expected = _expected(_metrics(config.output_dir))
    actual = {
        key: [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=_step)]
        for key in run.data.metrics
    }
    assert sorted(actual) == sorted(expected)
    for key, points in expected.items():
        assert actual[key] == points, key  # MLflow keeps float64: exactly equal
    params = run.data.params
    assert params["trainer.max_steps"] == "12"
    assert params["trainer.learning_rate"] == "0.01"
    assert params["trainer.loggers"] == '["mlflow"]'
    assert params["config.model.dim"] == "16"
    assert params["config.data.files"] == '["a.txt", "b.txt"]'
    artifacts = [a.path for a in client.list_artifacts(run_id)]
    assert artifacts == ["metrics.jsonl"]


def _step(metric: Any) -> int:
    return int(metric.step)


def test_mlflow_resume_continues_the_run_without_repeating_steps(
    make_model, make_source, make_config, tmp_path: Path
) -> None:
    uri = (tmp_path / "mlruns").as_uri()
    settings = {
        "max_steps": 12,
        "log_every": 3,
        "save_every": 5,
        "loggers": ["mlflow"],
        "mlflow_tracking_uri": uri,
    }
    config = make_config("ml-resume", **settings)
    with pytest.raises(Crash):
        Trainer(make_model(0), make_source(), config, callbacks=[CrashAfterLog(9)]).fit()
    first = json.loads((Path(config.output_dir) / "mlflow_run.json").read_text())["run_id"]
    Trainer(make_model(0), make_source(), make_config("ml-resume", **settings)).fit()
    second = json.loads((Path(config.output_dir) / "mlflow_run.json").read_text())["run_id"]
    assert second == first
    client = _mlflow_client(uri)
    history = sorted(client.get_metric_history(first, "train/loss"), key=_step)
    records = _metrics(config.output_dir)
    assert [m.step for m in history] == [r["step"] for r in records] == [3, 6, 9, 12]
    # Steps 6 and 9 were re-trained bit for bit: the values the run kept are the file's.
    assert [m.value for m in history] == [r["loss"] for r in records]
    assert len(client.search_runs([client.get_run(first).info.experiment_id])) == 1


def test_missing_packages_name_the_extra_to_install(
    monkeypatch, make_model, make_source, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(MissingTrackerError, match=r'pip install "ptm-core\[tensorboard\]"'):
        TensorBoardLogger(tmp_path)
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(MissingTrackerError, match=r'pip install "ptm-core\[mlflow\]"'):
        MLflowLogger(None, "x")
    # Through the config: the trainer fails at construction, before any step.
    config = TrainerConfig(output_dir=str(tmp_path / "run"), loggers=["mlflow"], device="cpu")
    with pytest.raises(MissingTrackerError, match=r"ptm-core\[mlflow\]"):
        Trainer(make_model(0), make_source(), config)
    assert not (tmp_path / "run").exists()


def test_unknown_logger_names_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"must name only tensorboard, mlflow.*'wandb'"):
        TrainerConfig(output_dir=str(tmp_path), loggers=["tensorboard", "wandb"])


def test_flatten_params_joins_keys_with_dots() -> None:
    flat = flatten_params({"a": {"b": 1, "c": {"d": None}}, "e": [1, 2], "f": "x" * 7000})
    assert flat == {"a.b": "1", "a.c.d": "null", "e": "[1, 2]", "f": "x" * 6000}
