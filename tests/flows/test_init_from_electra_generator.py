"""``ptm pretrain init_from=<ElectraForMaskedLM folder> objective=mlm`` continues ELECTRA's
generator with its own MLM head (step 1's loss is transformers' on the batch the run saw),
and ``ptm export --format hf`` writes an ``ElectraForMaskedLM`` again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from hf_folders import sample_wordpiece, saved

from flows.cli import main
from ptm_core.models.pretraining import PretrainingModel


def _generator(directory: Path) -> Any:
    tokenizer = sample_wordpiece()
    config = transformers.ElectraConfig(
        vocab_size=len(tokenizer),
        embedding_size=16,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=128,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(0)
    return saved(transformers.ElectraForMaskedLM(config), directory, tokenizer)


def test_an_electra_generator_continues_with_its_head_and_exports_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    model = _generator(hf_dir)
    seen: list[dict[str, torch.Tensor]] = []
    forward = PretrainingModel.forward

    def recording(self: PretrainingModel, batch: dict[str, torch.Tensor]) -> Any:
        if not seen:
            seen.append({k: v.detach().clone() for k, v in batch.items() if torch.is_tensor(v)})
        return forward(self, batch)

    monkeypatch.setattr(PretrainingModel, "forward", recording)
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "objective=mlm",
            f"init_from={hf_dir}",
            "trainer.max_steps=1",
            "trainer.log_every=1",
            f"trainer.output_dir={run}",
            f"data.cache_dir={run / 'cache'}",
            "data.batch_size=4",
            "data.max_length=64",
            "trainer.precision=fp32",
        ]
    )
    assert code == 0
    batch = seen[0]
    first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    with torch.no_grad():
        expected = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"].long(),
            token_type_ids=batch["token_type_ids"],
            labels=batch["mlm_labels"],
        ).loss
    assert (batch["mlm_labels"] != -100).any()
    assert first["loss"] == pytest.approx(expected.item(), abs=1e-5)

    capsys.readouterr()
    assert main(["export", "--format", "hf", str(run / "final"), str(tmp_path / "out")]) == 0
    assert "ElectraForMaskedLM" in capsys.readouterr().out
    exported = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    assert type(exported) is transformers.ElectraForMaskedLM
