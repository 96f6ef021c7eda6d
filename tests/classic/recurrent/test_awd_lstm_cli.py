"""`ptm pretrain experiment=awd_lstm_tiny`, then `ptm finetune` on its final/ (ULMFiT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_classic.recurrent.awd_lstm import AWDLSTMLanguageModel
from ptm_classic.recurrent.ulmfit import load_ulmfit_classifier


def test_awd_lstm_tiny_pretrains_from_the_cli_and_finetunes_as_ulmfit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "lm"
    code = main(
        [
            "pretrain",
            "experiment=awd_lstm_tiny",
            "trainer.max_steps=3",
            "trainer.log_every=1",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
            "trainer.device=cpu",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "valid_perplexity" in printed and str(out / "final") in printed
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3]
    assert all(r["lm/lm_loss"] > 0 and r["lm/ar"] >= 0 and r["lm/tar"] >= 0 for r in records)
    lm = AWDLSTMLanguageModel.from_pretrained(out / "final")
    assert lm.config.num_layers == 3 and lm.config.tie_weights
    assert (out / "final" / "vocab.txt").is_file()

    code = main(
        [
            "finetune",
            "task=gain_sentiment",
            f"model={out / 'final'}",
            "trainer.max_steps=10",
            "trainer.schedule=slanted_triangular",
            "trainer.layer_lr_decay=0.3846",
            "trainer.unfreeze_every=2",
            f"trainer.output_dir={tmp_path / 'clf'}",
            "trainer.progress=false",
            "trainer.device=cpu",
        ]
    )
    assert code == 0
    classifier = load_ulmfit_classifier(tmp_path / "clf" / "final")
    assert classifier.head_config["label_names"] == ["0", "1"]
    eval_record = json.loads((tmp_path / "clf" / "eval.json").read_text())
    assert 0.0 <= eval_record["dev/accuracy"] <= 1.0
    ids = torch.tensor([[2, 10, 11, 3]])
    assert classifier({"input_ids": ids}).logits.shape == (1, 2)
    # predict / `ptm evaluate` read the ULMFiT final through the fine-tuned loader and score
    # the dev file with the metrics the run itself reported.
    from ptm_core.finetune.recipe import predict

    metrics, _ = predict(tmp_path / "clf" / "final")
    assert metrics["accuracy"] == pytest.approx(eval_record["dev/accuracy"], abs=1e-6)
