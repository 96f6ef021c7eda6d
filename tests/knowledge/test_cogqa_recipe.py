"""The cogqa recipe: `ptm pretrain experiment=cogqa_tiny` trains, evaluates and saves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.config import compose_config
from flows.runner import run_composed
from ptm_core import TransformerEncoder
from ptm_knowledge.cogqa import generate_bridge_questions, load_cogqa


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.filterwarnings("ignore:fit_reasoner")  # 2 reader epochs: System 2 may get no data
def test_cogqa_recipe_trains_evaluates_and_reloads(tmp_path: Path, sample_kg) -> None:
    old = torch.get_num_threads()
    cfg = compose_config(
        [
            "experiment=cogqa_tiny",
            "cogqa.reader_epochs=2",
            "cogqa.reasoner_epochs=1",
            "data.num_train=30",
            f"trainer.output_dir={tmp_path}",
        ]
    )
    result = run_composed(cfg)
    assert torch.get_num_threads() == old
    assert result.output_dir == tmp_path and result.last_checkpoint == tmp_path / "final"
    records = [json.loads(x) for x in result.metrics_path.read_text().splitlines()]
    assert "reader/loss" in records[0]
    # One record per optimiser step, then the dev metrics at the last step.
    assert [r["step"] for r in records[:-1]] == list(range(1, len(records)))
    assert records[-1]["step"] == records[-2]["step"]
    assert records[-1] == result.final_metrics and result.final_metrics["num_train"] == 30
    for key in ("dev/joint_f1", "dev/baseline_joint_f1", "dev/sp_f1", "dev/em"):
        assert 0.0 <= result.final_metrics[key] <= 1.0
    assert TransformerEncoder.from_pretrained(result.encoder_dir).config.hidden_size == 64
    loaded = load_cogqa(result.last_checkpoint)
    example = generate_bridge_questions(sample_kg, num_questions=1, seed=5)[0]
    before, _ = loaded.predict(example)
    again, _ = load_cogqa(result.last_checkpoint).predict(example)
    assert before == again
