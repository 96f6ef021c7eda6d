"""Normalisation layers: LayerNorm (BERT/BART) or RMSNorm (T5), chosen by name.

- :class:`RMSNorm` (T5's ``T5LayerNorm``, Zhang & Sennrich, 2019): scale-only
  normalisation, no mean, no bias.
- :func:`make_norm`: the norm a layer asks for by ``norm_type`` (:data:`NORM_TYPES`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

NORM_TYPES = ("layernorm", "rmsnorm")


class RMSNorm(nn.Module):
    """Root-mean-square layer norm (Zhang & Sennrich, 2019), T5's ``T5LayerNorm``.

    ``y = w * x / sqrt(mean(x^2) + eps)``: no mean subtraction and no bias. The mean of
    squares is accumulated in float32 for half-precision inputs, as T5 does.

    Args:
        hidden_size: width ``D``.
        eps: added to the mean of squares (T5: 1e-6).

    Shapes:
        ``(..., D) -> (..., D)``.
    """

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(variance + self.eps)).type_as(x)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(norm_type: str, hidden_size: int, eps: float) -> nn.Module:
    """A LayerNorm (``"layernorm"``, BERT/BART) or an :class:`RMSNorm` (``"rmsnorm"``, T5).

    Raises:
        ValueError: unknown ``norm_type``; the message lists the valid ones.
    """
    if norm_type == "layernorm":
        return nn.LayerNorm(hidden_size, eps=eps)
    if norm_type == "rmsnorm":
        return RMSNorm(hidden_size, eps=eps)
    raise ValueError(f"unknown norm_type {norm_type!r}; valid: {', '.join(NORM_TYPES)}")
