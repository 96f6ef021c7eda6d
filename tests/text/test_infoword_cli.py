"""`ptm pretrain experiment=infoword_tiny`: the loss falls, and its final/ is a core BERT
folder that `ptm finetune` fine-tunes (the critic's tensors stay in heads.safetensors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from flows.cli import main
from ptm_core import TransformerEncoder

SMALL = [
    "model.num_layers=1",
    "model.hidden_size=64",
    "model.num_heads=2",
    "model.intermediate_size=128",
    "data.max_length=64",
    "data.batch_size=8",
    "trainer.max_steps=30",
    "trainer.log_every=1",
    "trainer.save_every=30",
    "trainer.warmup_steps=3",
    "trainer.learning_rate=2e-3",
    "trainer.progress=false",
]


@pytest.mark.integration
def test_infoword_tiny_trains_with_a_falling_loss_and_fine_tunes(tmp_path: Path) -> None:
    out = tmp_path / "infoword"
    assert main(["pretrain", "experiment=infoword_tiny", f"trainer.output_dir={out}", *SMALL]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3, losses
    assert {"mlm/loss", "infoword/loss", "infoword/accuracy", "infoword/mi_bound"} <= set(
        records[-1]
    )
    assert all(r["infoword/negatives"] > 0 for r in records)  # in-batch negatives were scored

    final = out / "final"
    assert TransformerEncoder.from_pretrained(final).config.hidden_size == 64
    config = json.loads((final / "config.json").read_text())
    assert config["ptm_model"] == "encoder"
    with safe_open(str(final / "heads.safetensors"), "pt") as heads:
        names = set(heads.keys())
    assert any("infoword" in name and "global_projection" in name for name in names), names

    tuned = tmp_path / "tuned"
    args = [
        "finetune",
        "task=sentiment",
        f"model={final}",
        "trainer.max_steps=4",
        f"trainer.output_dir={tuned}",
        "trainer.progress=false",
    ]
    assert main(args) == 0
    assert (tuned / "final" / "task.json").is_file()
