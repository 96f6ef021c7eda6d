"""The cheap CPU dropout mask: its rate, independence, scaling, gradient and switches."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ptm_core.modules.dropout import (
    Dropout,
    drop_threshold,
    dropout,
    keep_mask,
)


def _z(observed: float, p: float, n: int) -> float:
    return abs(observed - p) / math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_drop_rate_matches_p_in_every_lane(p: float) -> None:
    """Each of the four int16 lanes of a 64-bit draw drops at rate p (a biased lane, e.g.
    from ``random_()``'s 63-bit range, would drop at 0 or 2p)."""
    torch.manual_seed(0)
    n = 400_000
    dropped = keep_mask((n // 4, 4), p, torch.device("cpu")) == 0
    rate = drop_threshold(p) / 65536
    assert abs(rate - p) <= 1 / 65536
    for lane in range(4):
        assert _z(dropped[:, lane].float().mean().item(), rate, n // 4) < 5
    assert _z(dropped.float().mean().item(), rate, n) < 5


def test_mask_elements_are_independent() -> None:
    """Neighbours (in and across 64-bit words) are dropped together at rate p^2."""
    torch.manual_seed(1)
    n, p = 1_000_000, 0.3
    dropped = keep_mask((n,), p, torch.device("cpu")) == 0
    rate = drop_threshold(p) / 65536
    for shift in (1, 3, 4, 5):
        both = (dropped[:-shift] & dropped[shift:]).float().mean().item()
        assert _z(both, rate * rate, n - shift) < 5


def test_output_scaling_and_gradient() -> None:
    torch.manual_seed(2)
    x = torch.randn(64, 128, dtype=torch.float64, requires_grad=True)
    y = dropout(x, 0.3)
    kept = y != 0
    scale = 65536 / (65536 - drop_threshold(0.3))
    torch.testing.assert_close(y[kept], x[kept] * scale)
    y.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, kept.double() * scale)
    # expectation preserved: the mean of many draws approaches x
    ones = torch.ones(200_000)
    assert abs(dropout(ones, 0.1).mean().item() - 1.0) < 0.005


def test_gradcheck_and_double_backward() -> None:
    x = torch.randn(32, 160, dtype=torch.float64, requires_grad=True)

    def seeded(t: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(3)
        return dropout(t, 0.25)

    assert torch.autograd.gradcheck(seeded, (x,), fast_mode=True)
    (grad,) = torch.autograd.grad((seeded(x) ** 2).sum(), x, create_graph=True)
    grad.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_bf16_stays_bf16_and_seed_repeats() -> None:
    x = torch.randn(8, 4, 64, 64).bfloat16()
    torch.manual_seed(4)
    a = dropout(x, 0.1)
    torch.manual_seed(4)
    b = dropout(x, 0.1)
    c = dropout(x, 0.1)
    assert a.dtype == torch.bfloat16
    assert torch.equal(a, b)
    assert not torch.equal(b, c)


def test_edge_cases_fall_back_to_torch() -> None:
    x = torch.randn(100, 100)
    assert dropout(x, 0.0) is x
    assert dropout(x, 0.5, training=False) is x
    assert torch.count_nonzero(dropout(x, 1.0)) == 0
    small = torch.ones(10, 10)  # below MIN_ELEMENTS: torch's own dropout
    torch.manual_seed(5)
    ours = dropout(small, 0.5)
    torch.manual_seed(5)
    assert torch.equal(ours, F.dropout(small, 0.5))


def test_module_is_a_drop_in_for_nn_dropout() -> None:
    module = Dropout(0.2)
    assert isinstance(module, nn.Dropout) and module.p == 0.2
    assert module.state_dict() == {}
    x = torch.randn(64, 128)
    assert torch.equal(module.eval()(x), x)
    y = module.train()(x)
    assert 0.1 < (y == 0).float().mean().item() < 0.3


def test_kernel_is_a_setting_of_each_module() -> None:
    x = torch.randn(64, 128)
    torch_kernel, ours = Dropout(0.1, kernel="torch"), Dropout(0.1, kernel="auto")
    torch.manual_seed(6)
    by_torch = torch_kernel(x)
    torch.manual_seed(6)
    assert torch.equal(by_torch, F.dropout(x, 0.1))
    torch.manual_seed(6)
    by_ours = ours(x)
    torch.manual_seed(6)
    assert torch.equal(by_ours, dropout(x, 0.1, kernel="auto"))
    assert not torch.equal(by_ours, by_torch)  # two kernels side by side, no global switch
    with pytest.raises(ValueError, match="auto, torch"):
        Dropout(0.1, kernel="philox")
