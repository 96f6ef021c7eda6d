"""Rotary position embeddings (RoPE, Su et al., 2021), as ModernBERT uses them.

Queries and keys are rotated by an angle proportional to their position, pair of
channels by pair of channels, so ``q_i . k_j`` depends on ``i - j`` only: positions enter
inside every attention layer and there is no position table. The channel pairs are the
two halves of a head (``x[:d/2]`` with ``x[d/2:]``), GPT-NeoX's layout, which Hugging
Face's ModernBERT, LLaMA and Gemma share; the rotation runs in float32 and is cast back.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def rotate_half(x: Tensor) -> Tensor:
    """``[x1, x2] -> [-x2, x1]`` over the last dimension (its two halves)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryEmbedding(nn.Module):
    """The rotation of one attention layer's queries and keys.

    Args:
        head_dim: width ``d`` of a head (even).
        theta: the base of the frequencies ``theta ** (-2i / d)`` (ModernBERT: 160 000 in
            its global layers, 10 000 in its local ones).

    Shapes:
        :meth:`forward`: query and key ``(..., L, d)`` (heads before ``L``, as
        ``(B, h, L, d)``, or ``(L, h, d)`` with ``heads_first=False``) and positions
        ``(L,)``; the same shapes back.
    """

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary positions need an even head width, got {head_dim}")
        self.head_dim = head_dim
        self.theta = float(theta)
        # Not a parameter and not saved: the frequencies follow from (d, theta).
        exponents = torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim
        self.inv_freq: Tensor
        self.register_buffer("inv_freq", 1.0 / (self.theta**exponents), persistent=False)

    def angles(self, positions: Tensor) -> tuple[Tensor, Tensor]:
        """``cos`` and ``sin`` of every position's angles, ``(L, d)`` float32 each."""
        inv_freq = self.inv_freq.to(device=positions.device, dtype=torch.float)
        freqs = positions.float()[:, None] * inv_freq[None, :]  # (L, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)  # (L, d)
        return emb.cos(), emb.sin()

    def forward(
        self, query: Tensor, key: Tensor, positions: Tensor, *, heads_first: bool = True
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``query`` and ``key`` by their ``positions``.

        Args:
            query, key: ``(B, h, L, d)`` (``heads_first``) or ``(L, h, d)`` (packed tokens).
            positions: ``(L,)`` integer positions.
            heads_first: whether the head dimension comes before ``L``.
        """
        cos, sin = self.angles(positions)
        if not heads_first:  # (L, h, d): one angle per token, shared by its heads
            cos, sin = cos[:, None, :], sin[:, None, :]
        return _rotate(query, cos, sin), _rotate(key, cos, sin)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, theta={self.theta:g}"


def _rotate(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    wide = x.float()
    return (wide * cos + rotate_half(wide) * sin).to(x.dtype)
