"""The ERNIE presets compose, and their families run end to end for a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.config import compose_config
from flows.runner import run_composed

TINY = [
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "data.max_length=48",
    "data.batch_size=8",
    "trainer.max_steps=4",
    "trainer.log_every=2",
    "trainer.progress=false",
    "trainer.device=cpu",
]


@pytest.mark.parametrize("experiment", ["ernie_baidu_tiny", "ernie_thu_tiny"])
def test_ernie_preset_runs(experiment: str, tmp_path: Path) -> None:
    extra = ["knowledge.kg_embeddings.num_epochs=5"] if experiment == "ernie_thu_tiny" else []
    cfg = compose_config(
        [f"experiment={experiment}", *TINY, *extra, f"trainer.output_dir={tmp_path}"]
    )
    assert cfg.recipe == experiment.removesuffix("_tiny")
    result = run_composed(cfg)
    assert (tmp_path / "linked_corpus.jsonl").is_file()
    assert (result.encoder_dir / "model.safetensors").is_file()
    records = [json.loads(x) for x in result.metrics_path.read_text().splitlines() if x.strip()]
    assert "mlm/loss" in records[-1]
    if experiment == "ernie_thu_tiny":
        assert "dea/loss" in records[-1]
        assert (tmp_path / "kg_embeddings" / "entity_embeddings.safetensors").is_file()
