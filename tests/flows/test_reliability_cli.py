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


def test_a_full_disk_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.runner
    from ptm_core.atomic import DiskFullError

    def full(cfg: object) -> None:
        raise DiskFullError(tmp_path / "final", free=0)

    monkeypatch.setattr(flows.runner, "run_composed", full)
    code = main(["pretrain", "experiment=bert_tiny", f"trainer.output_dir={tmp_path}"])
    assert code == 1
    line = _one_error_line(capsys)
    assert "no space left on the device while writing" in line and str(tmp_path) in line


def test_evaluate_on_a_missing_directory_prints_only_the_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main(["evaluate", str(missing)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    # Checked before Prefect's temporary server starts: no server notices, one line.
    assert len(err) == 1, err
    assert err[0].startswith(f"ptm: {missing}") and "does not exist" in err[0]


def test_prefect_run_logs_keep_the_message_but_not_the_traceback_of_user_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import logging

    from flows.cli import _setup_logging

    _setup_logging()
    logger = logging.getLogger("prefect.flow_runs")
    with caplog.at_level(logging.ERROR, logger="prefect.flow_runs"):
        try:
            raise ValueError("kg/entities.tsv:3: bad row")
        except ValueError:
            logger.exception("Encountered exception during execution")
        try:
            raise KeyError("a bug")
        except KeyError:
            logger.exception("Encountered exception during execution")
    user, bug = caplog.records[-2:]
    assert user.exc_info is None  # the ptm: line names the problem
    assert bug.exc_info is not None  # a bug keeps its traceback
