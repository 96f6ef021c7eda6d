"""Issue 20, defect 9: one line where a traceback used to be, for config and device errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flows.cli import main

FAST = ["model.num_layers=1", "data.max_length=64", "data.batch_size=8", "trainer.progress=false"]


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("ptm: ")]
    assert len(errors) == 1, err
    assert not any("Traceback" in line for line in err), err
    return errors[0]


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.max_steps=abc", "TrainerConfig.max_steps must be an integer >= 1, got 'abc'"),
        ("trainer.learning_rate=-1", "TrainerConfig.learning_rate must be a finite number > 0"),
        ("trainer.precision=fp8", "TrainerConfig.precision must be one of auto, fp32, bf16"),
    ],
)
def test_trainer_config_errors_are_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], override: str, expected: str
) -> None:
    code = main(
        ["pretrain", "experiment=bert_tiny", f"trainer.output_dir={tmp_path}", override, *FAST]
    )
    assert code != 0
    line = _one_error_line(capsys)
    assert line.startswith("ptm: bad config at trainer: ")
    assert expected in line
    assert "Error in call to target" not in line and "full_key" not in line


def test_device_cuda_without_a_gpu_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            f"trainer.output_dir={tmp_path}",
            "trainer.device=cuda",
            "trainer.max_steps=1",
            *FAST,
        ]
    )
    assert code != 0
    line = _one_error_line(capsys)
    assert "trainer.device='cuda'" in line and "trainer.device=cpu" in line
