"""Position-wise feed-forward block and the activations it can use."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _gelu_tanh(x: Tensor) -> Tensor:
    return F.gelu(x, approximate="tanh")


def _quick_gelu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(1.702 * x)


def _gelu_fast(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def _gelu_python(x: Tensor) -> Tensor:
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh,
    "gelu_pytorch_tanh": _gelu_tanh,
    "gelu_fast": _gelu_fast,
    "gelu_python": _gelu_python,
    "quick_gelu": _quick_gelu,
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
    "tanh": torch.tanh,
}


def get_activation(name: str) -> Callable[[Tensor], Tensor]:
    """Return the activation function called ``name``.

    Raises:
        ValueError: unknown name; the message lists the valid ones.
    """
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; valid names: {', '.join(sorted(ACTIVATIONS))}"
        ) from None


class FeedForward(nn.Module):
    """Two-layer position-wise MLP: ``W_out(act(W_in x))``.

    Args:
        hidden_size: model width ``D``.
        intermediate_size: inner width ``F`` (4 D in BERT).
        activation: a name from :data:`ACTIVATIONS` (``"gelu"`` = exact erf GELU, as BERT).
        bias: whether the linear layers have biases.

    Shapes:
        ``(..., D) -> (..., D)``.
    """

    def __init__(
        self, hidden_size: int, intermediate_size: int, activation: str = "gelu", bias: bool = True
    ) -> None:
        super().__init__()
        self.w_in = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.w_out = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.activation = get_activation(activation)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_out(self.activation(self.w_in(x)))


class GatedFeedForward(nn.Module):
    """Gated feed-forward ``W_out(act(W_gate x) * W_in x)`` (Shazeer, 2020; T5 v1.1 gated-GELU).

    Args:
        hidden_size: model width ``D``.
        intermediate_size: inner width ``F``.
        activation: activation of the gate branch (T5 v1.1: ``"gelu_new"``).
        bias: whether the linear layers have biases (T5: no).

    Shapes:
        ``(..., D) -> (..., D)``.
    """

    def __init__(
        self,
        hidden_size: int,
        intermediate_size: int,
        activation: str = "gelu_new",
        bias: bool = False,
    ) -> None:
        super().__init__()
        self.w_gate = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.w_in = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.w_out = nn.Linear(intermediate_size, hidden_size, bias=bias)
        self.activation = get_activation(activation)

    def forward(self, x: Tensor) -> Tensor:
        return self.w_out(self.activation(self.w_gate(x)) * self.w_in(x))
