"""The `ptm` command line: pre-training from the shell, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_core import TransformerEncoder
from ptm_core.tokenization import WordPieceTokenizer

FAST = ["model.num_layers=1", "data.max_length=64", "data.batch_size=8", "trainer.progress=false"]


def _losses(metrics: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in metrics.read_text().splitlines()]


@pytest.mark.integration
def test_tiny_pretraining_loss_falls_and_writes_a_loadable_encoder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            "trainer.max_steps=60",
            "trainer.log_every=1",
            "trainer.save_every=30",
            f"trainer.output_dir={out}",
            *FAST,
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert str(out / "final") in printed and "metrics.jsonl" in printed
    losses = _losses(out / "metrics.jsonl")
    assert len(losses) == 60
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10
    encoder = TransformerEncoder.from_pretrained(out / "final")
    tokenizer = WordPieceTokenizer.from_directory(out / "final")
    ids = torch.tensor([tokenizer.encode("The river flows to the sea.").input_ids])
    assert encoder(ids).last_hidden_state.shape == (1, ids.shape[1], 128)
    assert (out / "checkpoints" / "step-00000060" / "model.safetensors").exists()


def test_shell_entry_point_runs_an_override(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flows.cli",
            "pretrain",
            "experiment=bert_tiny",
            "trainer.max_steps=2",
            f"trainer.output_dir={tmp_path / 'run'}",
            *FAST,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "final encoder" in result.stdout
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 2


def test_bad_override_exits_2_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pretrain", "model=nope"]) == 2
    err = capsys.readouterr().err
    assert "model" in err and "bert_tiny" in err


def test_missing_corpus_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.txt"
    code = main(
        ["pretrain", f"data.corpus={missing}", f"trainer.output_dir={tmp_path / 'r'}", *FAST]
    )
    assert code == 1
    assert str(missing) in capsys.readouterr().err


def test_config_command_prints_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "experiment=bert_tiny"]) == 0
    assert "experiment_name: bert_tiny" in capsys.readouterr().out
