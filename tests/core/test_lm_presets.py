"""`ptm pretrain experiment=NAME` for SpanBERT, UniLM, GPT and XLNet: a few dozen steps, loss falls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
@pytest.mark.parametrize(
    ("experiment", "parts"),
    [
        ("spanbert_tiny", {"mlm/loss", "sbo/loss", "sbo/accuracy"}),
        ("unilm_tiny", {"unilm/loss"}),
        ("gpt_tiny", {"clm/loss", "clm/perplexity"}),
        ("xlnet_tiny", {"plm/loss", "plm/accuracy", "plm/predictions"}),
    ],
)
def test_preset_trains_with_a_falling_loss(
    experiment: str, parts: set[str], tmp_path: Path
) -> None:
    out = tmp_path / experiment
    assert main(["pretrain", f"experiment={experiment}", f"trainer.output_dir={out}", *SMALL]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3, losses
    assert parts <= set().union(*records)
    if experiment == "unilm_tiny":  # every mask kind was drawn and logged
        kinds = {k for r in records for k in r if k.startswith("unilm/loss_")}
        assert len(kinds) == 4, kinds
    assert TransformerEncoder.from_pretrained(out / "final").config.hidden_size == 64
