"""AdamW parameter groups and the BERT warm-up/decay schedule."""

from __future__ import annotations

import pytest
import torch

from ptm_core.training import Trainer, build_optimizer, linear_warmup_decay


def _lrs(warmup: int, total: int) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
    scheduler = linear_warmup_decay(optimizer, warmup, total)
    lrs = []
    for _ in range(total + 1):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


def test_schedule_warms_up_linearly_then_decays_to_zero() -> None:
    expected = [0.0, 0.5, 1.0, 1.5, 2.0, 2.0 * 5 / 6, 2.0 * 4 / 6, 1.0, 2.0 * 2 / 6, 2.0 / 6, 0.0]
    assert _lrs(warmup=4, total=10) == pytest.approx(expected)


def test_schedule_without_warmup_starts_at_peak() -> None:
    assert _lrs(warmup=0, total=4) == pytest.approx([2.0, 1.5, 1.0, 0.5, 0.0])


def test_schedule_rejects_bad_lengths() -> None:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        linear_warmup_decay(optimizer, 5, 4)


def test_no_weight_decay_on_1d_params_and_tied_params_once(make_model, make_config) -> None:
    model = make_model()
    optimizer = build_optimizer(model, make_config(weight_decay=0.1))
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert all(p.ndim >= 2 for p in decay["params"])
    assert all(p.ndim < 2 for p in no_decay["params"])
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p in no_decay["params"]) == [
        "hidden.bias", "norm.bias", "norm.weight", "out.bias",
    ]  # fmt: skip
    assert sorted(names[id(p)] for p in decay["params"]) == ["embed.weight", "hidden.weight"]
    assert optimizer.defaults["fused"]  # fused AdamW on CPU too when fused_optimizer=None


def test_frozen_model_is_rejected(make_model, make_config) -> None:
    model = make_model().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        build_optimizer(model, make_config())


def test_trainer_logs_the_scheduled_rate(make_model, make_source, make_config) -> None:
    config = make_config(max_steps=6, warmup_steps=2, log_every=1, learning_rate=0.6)
    history = Trainer(make_model(), make_source(), config).fit().history
    # The rate used by step s is the schedule at s - 1.
    assert [r["lr"] for r in history] == pytest.approx([0.0, 0.3, 0.6, 0.45, 0.3, 0.15])
