"""`ptm pretrain experiment=structbert_tiny` from the command line: every part of the loss
falls, the result is a core BERT ``final/``, and `ptm finetune` takes it as it is."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from flows.cli import main
from ptm_core import TransformerEncoder
from ptm_core.finetune.recipe import load_finetuned

FAST = ["model.num_layers=1", "data.max_length=64", "data.batch_size=8", "trainer.progress=false"]
PARTS = ("loss", "mlm/loss", "word_structural/loss", "sentence_structural/loss")


@pytest.fixture
def one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _mean(records: list[dict], key: str) -> float:
    return sum(r[key] for r in records) / len(records)


@pytest.mark.integration
def test_structbert_tiny_pretrains_with_falling_loss_and_finetunes(
    tmp_path: Path, one_thread: None, capsys: pytest.CaptureFixture[str]
) -> None:
    pre = tmp_path / "pre"
    code = main(
        [
            "pretrain",
            "experiment=structbert_tiny",
            "trainer.max_steps=60",
            "trainer.log_every=1",
            f"trainer.output_dir={pre}",
            *FAST,
        ]
    )
    assert code == 0, capsys.readouterr().err
    records = [json.loads(x) for x in (pre / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 60
    first, last = records[:10], records[-10:]
    for key in PARTS[:3]:  # the token-level losses fall within 60 steps of the sample corpus
        assert _mean(last, key) < _mean(first, key), key
    assert all(r["word_structural/predictions"] > 0 for r in records)
    # The final/ is a core BERT encoder with the three objectives' heads beside it.
    encoder = TransformerEncoder.from_pretrained(pre / "final")
    assert encoder.config.num_layers == 1
    heads = load_file(pre / "final" / "heads.safetensors")
    sentence = heads["objectives.sentence_structural.head.classifier.weight"]
    assert sentence.shape == (3, 128)
    assert "objectives.word_structural.head.dense.weight" in heads
    # Hugging Face has no 3-way sentence head: the export is a BertForMaskedLM, not a
    # BertForPreTraining with the 3-way classifier in the 2-way NSP slot.
    transformers = pytest.importorskip("transformers")
    assert main(["export", "--format", "hf", str(pre / "final"), str(tmp_path / "hf")]) == 0
    hf_config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert hf_config["architectures"] == ["BertForMaskedLM"]
    transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf")

    out = tmp_path / "ft"
    code = main(
        [
            "finetune",
            "task=kg_pair",
            f"model={pre / 'final'}",
            "trainer.max_steps=6",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
        ]
    )
    assert code == 0, capsys.readouterr().err
    evaluation = json.loads((out / "eval.json").read_text())
    assert 0.0 <= evaluation["dev/accuracy"] <= 1.0
    model, _tokenizer, task, record = load_finetuned(out / "final")
    assert task.name == "kg_pair" and record["provenance"]["init_from"] == str(pre / "final")
    # Fine-tuning starts from the pre-trained encoder, not a fresh one: 6 steps move the
    # token table a little, a fresh init would be as far from it as it is large.
    key = "embeddings.word.weight"
    start = TransformerEncoder.from_pretrained(pre / "final").state_dict()[key]
    tuned = model.encoder.state_dict()[key]
    assert (tuned - start).norm() < 0.2 * start.norm()
