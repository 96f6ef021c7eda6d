"""`ptm pretrain` (in process, no Prefect) gives MLflow the whole composed config as the run's
parameters, as the pretrain flow does, not only the trainer's settings."""

from __future__ import annotations

import json
from pathlib import Path

from flows.cli import main


def test_ptm_pretrain_logs_the_composed_config_to_mlflow(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    out = tmp_path / "run"
    uri = f"file:{tmp_path / 'mlruns'}"
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "trainer.max_steps=2",
            "trainer.log_every=1",
            "trainer.progress=false",
            "trainer.loggers=[mlflow]",
            f"trainer.mlflow_tracking_uri={uri}",
            f"trainer.output_dir={out}",
        ]
    )
    assert code == 0
    run_id = json.loads((out / "mlflow_run.json").read_text())["run_id"]
    params = MlflowClient(tracking_uri=uri).get_run(run_id).data.params
    assert params["trainer.max_steps"] == "2"
    assert params["config.experiment_name"] == "bert_tiny"
    assert params["config.trainer.max_steps"] == "2"
    assert "config.model.hidden_size" in params
