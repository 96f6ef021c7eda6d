"""`ptm pretrain experiment=NAME` for BART, T5 and MASS: a few dozen steps, loss falls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_core.encoders import EncoderDecoderModel

SMALL = [
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "data.max_length=48",
    "data.batch_size=8",
    "trainer.max_steps=30",
    "trainer.log_every=1",
    "trainer.save_every=30",
    "trainer.warmup_steps=3",
    "trainer.learning_rate=3e-3",
    "trainer.progress=false",
]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.integration
@pytest.mark.parametrize("experiment", ["bart_tiny", "t5_tiny", "mass_tiny"])
def test_seq2seq_preset_trains_with_a_falling_loss(experiment: str, tmp_path: Path) -> None:
    out = tmp_path / experiment
    assert main(["pretrain", f"experiment={experiment}", f"trainer.output_dir={out}", *SMALL]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.3, losses
    name = experiment.removesuffix("_tiny")
    assert {f"{name}/loss", f"{name}/accuracy"} <= set().union(*records)
    assert EncoderDecoderModel.from_pretrained(out / "final").config.hidden_size == 32
