"""The champion registry mirrored to MLflow's model registry (PTM_MLFLOW_REGISTRY)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.registry import MLflowRegistryPeer, ModelRegistry


def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_promotions_become_mlflow_model_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_REGISTRY_URI", raising=False)
    monkeypatch.setenv("PTM_MLFLOW_REGISTRY", "tiny-bert")
    monkeypatch.chdir(tmp_path)
    registry = ModelRegistry(tmp_path / "registry")
    assert registry.mlflow is not None and registry.mlflow.model_name == "tiny-bert"
    uri = (tmp_path / "registry" / "mlruns").resolve().as_uri()
    assert registry.mlflow.tracking_uri == uri

    first = registry.consider(tmp_path / "a", {"accuracy": 0.5, "loss": 2.0}, metric="accuracy")
    worse = registry.consider(tmp_path / "b", {"accuracy": 0.4, "loss": 2.5}, metric="accuracy")
    better = registry.consider(tmp_path / "c", {"accuracy": 0.7, "loss": 1.5}, metric="accuracy")
    assert (first.mlflow_version, worse.mlflow_version, better.mlflow_version) == ("1", None, "2")
    assert [h["promoted"] for h in registry.history()] == [True, False, True]
    assert not (tmp_path / "mlflow.db").exists()  # MLflow's global default store is untouched

    # MLflow's file registry reads versions through the global URI: point it at the store.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)

    client = _client(uri)
    versions = sorted(client.search_model_versions("name='tiny-bert'"), key=lambda v: v.version)
    assert [v.source for v in versions] == [str((tmp_path / d).resolve()) for d in "ac"]
    champion = client.get_model_version_by_alias("tiny-bert", "champion")
    assert str(champion.version) == "2" and champion.tags["ptm.value"] == "0.7"
    run = client.get_run(champion.run_id)
    assert run.data.metrics == {"accuracy": 0.7, "loss": 1.5}
    assert run.data.params["model_dir"] == str((tmp_path / "c").resolve())
    # ptm's champion record says where MLflow holds it.
    record = json.loads((tmp_path / "registry" / "champion.json").read_text())
    assert record["mlflow"] == {"tracking_uri": uri, "model": "tiny-bert", "version": "2"}


def test_off_by_default_and_a_failing_mirror_never_undoes_a_promotion(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PTM_MLFLOW_REGISTRY", raising=False)
    assert ModelRegistry(tmp_path / "off").mlflow is None
    monkeypatch.setenv("PTM_MLFLOW_REGISTRY", "false")
    assert ModelRegistry(tmp_path / "off").mlflow is None

    class Broken(MLflowRegistryPeer):
        def register(self, record: dict) -> str:
            raise ConnectionError("tracking server unreachable")

    peer = Broken((tmp_path / "mlruns").as_uri())
    registry = ModelRegistry(tmp_path / "registry", mlflow=peer)
    decision = registry.consider(tmp_path / "a", {"accuracy": 0.5}, metric="accuracy")
    assert decision.promoted and decision.mlflow_version is None
    champion = registry.champion()
    assert champion is not None and champion["model_dir"] == str(tmp_path / "a")
    assert champion["mlflow_error"] == "tracking server unreachable"
