"""Unknown keys and bad values fail at compose time with one ``ptm:`` line (issue 21, item 4).

The valid keys are read from the schemas behind the config (TrainerConfig's fields, a
builder's parameters, the YAML node's keys), so the expected lists here are read the same
way and a new field needs no change to these tests.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from flows.cli import main
from flows.config import ConfigError, compose_config, config_dir
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.training import TrainerConfig

TRAINER_FIELDS = [f.name for f in dataclasses.fields(TrainerConfig)]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("ptm: "), lines
    assert "Traceback" not in captured.err
    return lines[0]


@pytest.mark.parametrize("command", ["pretrain", "config"])
@pytest.mark.parametrize("override", ["trainer.max_step=5", "+trainer.max_step=5"])
def test_unknown_trainer_key_suggests_and_lists_the_valid_keys(
    command: str, override: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "experiment=bert_tiny", override]) == 2
    line = _one_line(capsys)
    assert "unknown key trainer.max_step:" in line
    assert "did you mean trainer.max_steps?" in line
    listed = line.split("valid keys of trainer (TrainerConfig): ")[1].split(", ")
    assert listed == sorted(TRAINER_FIELDS)


def test_unknown_data_key_lists_the_keys_of_the_yaml_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data_keys = sorted(compose_config(["experiment=bert_tiny"]).data)
    assert main(["config", "experiment=bert_tiny", "data.batchsize=3"]) == 2
    line = _one_line(capsys)
    assert "unknown key data.batchsize: did you mean data.batch_size?" in line
    assert line.split("valid keys of data: ")[1].split(", ") == data_keys


def test_unknown_group_name_at_the_root(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "modle=bert_base"]) == 2
    line = _one_line(capsys)
    assert "unknown key modle: did you mean model?" in line
    assert "experiment" in line and "trainer" in line


def test_unknown_option_of_a_group_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "experiment=bert_tiy"]) == 2
    line = _one_line(capsys)
    assert "unknown option experiment=bert_tiy: did you mean experiment=bert_tiny?" in line
    assert "albert_tiny" in line


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("trainer.max_steps=abc", ["trainer", "TrainerConfig.max_steps", "integer", "'abc'"]),
        ("trainer.max_steps=2.5", ["trainer", "TrainerConfig.max_steps", "integer", "2.5"]),
        ("trainer.warmup_ratio=abc", ["trainer.warmup_ratio", "expected float", "'abc'"]),
        ("data.batch_size=-1", ["data.batch_size", "non-negative int", "-1"]),
        ("data.batch_size=abc", ["data.batch_size", "expected int", "'abc'"]),
        ("data.batch_size=1.5", ["data.batch_size", "expected int", "1.5"]),
        ("model.hidden_size=2.5", ["model.hidden_size", "expected int (bert_encoder)", "2.5"]),
        ("model.norm_position=mid", ["model.norm_position", "'post' | 'pre'", "'mid'"]),
        (
            "objective.objectives.mlm.mask_prob=high",
            ["objective.objectives.mlm.mask_prob", "expected float", "'high'"],
        ),
    ],
)
def test_bad_values_are_one_line_with_key_value_and_type(
    override: str, expected: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pretrain", "experiment=bert_tiny", override]) == 2
    line = _one_line(capsys)
    assert line.startswith("ptm: bad config at ")
    for fragment in expected:
        assert fragment in line, (fragment, line)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("finetune.dropuot=0.2", "unknown key finetune.dropuot: did you mean finetune.dropout?"),
        ("task.max_lenght=3", "unknown key task.max_lenght: did you mean task.max_length?"),
        ("trainer.max_step=3", "unknown key trainer.max_step: did you mean trainer.max_steps?"),
        ("task.batch_size=abc", "batch_size must be an integer >= 1, got 'abc'"),
        ("task.batch_size=0", "batch_size must be an integer >= 1, got 0"),
    ],
)
def test_finetune_config_errors_are_one_line(
    override: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["finetune", override]) == 2
    assert expected in _one_line(capsys)


def test_task_keys_are_the_task_spec_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["finetune", "task.max_lenght=3"]) == 2
    listed = _one_line(capsys).split("valid keys of task (TaskSpec): ")[1].split(", ")
    assert listed == sorted(f.name for f in dataclasses.fields(TaskSpec))


def test_a_key_the_target_takes_needs_no_plus() -> None:
    # bert_encoder takes embedding_size although bert_tiny.yaml does not list it.
    cfg = compose_config(["experiment=bert_tiny", "model.embedding_size=64"])
    assert cfg.model.embedding_size == 64
    task = compose_config(["task.doc_stride=32"], config_name="finetune").task
    assert task.doc_stride == 32


def test_valid_overrides_still_compose() -> None:
    cfg = compose_config(
        ["experiment=bert_tiny", "trainer.max_steps=7", "data.tokenizer=null", "seed=3"]
    )
    assert (cfg.trainer.max_steps, cfg.data.tokenizer, cfg.trainer.seed) == (7, None, 3)


def test_a_typo_inside_a_users_yaml_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = tmp_path / "configs"
    shutil.copytree(config_dir(), configs)
    (configs / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ntrainer:\n  max_stesp: 5\n", encoding="utf-8"
    )
    monkeypatch.setenv("PTM_CONFIG_DIR", str(configs))
    with pytest.raises(ConfigError, match=r"unknown key trainer\.max_stesp: did you mean"):
        compose_config(["experiment=mine"])
