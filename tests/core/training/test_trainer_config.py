"""TrainerConfig validation: every bad value names its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptm_core.training import TrainerConfig


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("output_dir", ""),
        ("max_steps", 0),
        ("learning_rate", 0.0),
        ("learning_rate", float("nan")),
        ("weight_decay", -0.1),
        ("adam_betas", (0.9,)),
        ("adam_betas", (0.9, 1.0)),
        ("adam_eps", 0.0),
        ("warmup_steps", -1),
        ("warmup_steps", 2000),
        ("warmup_ratio", 1.5),
        ("gradient_accumulation_steps", 0),
        ("gradient_accumulation_steps", 1.5),
        ("max_grad_norm", 0.0),
        ("precision", "fp16"),
        ("device", "gpu0"),
        ("seed", -1),
        ("log_every", 0),
        ("save_every", 0),
        ("keep_last", 0),
        ("resume", "yes"),
        ("fused_optimizer", "auto"),
        ("activation_checkpointing", "yes"),
        ("fsdp", 1),
        ("cuda_graphs", "true"),
        ("cuda_graphs", True),  # without compile=true
    ],
)
def test_bad_values_name_the_field(field, value, tmp_path) -> None:
    settings = {"output_dir": str(tmp_path), field: value}
    with pytest.raises(ValueError, match=rf"TrainerConfig\.{field} "):
        TrainerConfig(**settings)


def test_warmup_steps_win_over_ratio(tmp_path) -> None:
    assert TrainerConfig(str(tmp_path), max_steps=100, warmup_ratio=0.1).num_warmup_steps == 10
    both = TrainerConfig(str(tmp_path), max_steps=100, warmup_ratio=0.1, warmup_steps=3)
    assert both.num_warmup_steps == 3


def test_hydra_style_values_are_normalised(tmp_path) -> None:
    config = TrainerConfig(Path(tmp_path), adam_betas=[0.9, 0.98], max_grad_norm=None)  # type: ignore[arg-type]
    assert config.output_dir == str(tmp_path)
    assert config.adam_betas == (0.9, 0.98)
    assert json.loads(json.dumps(config.to_dict()))["adam_betas"] == [0.9, 0.98]
