"""Self-attention with rotary positions and an optional local window (ModernBERT)."""

from __future__ import annotations

import torch
from torch import Tensor

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.rotary import RotaryEmbedding
from ptm_core.modules.unpadding import UnpadLayout


def sliding_structure(
    mask: Tensor | AttentionStructure | None,
    batch: int,
    length: int,
    window: int,
    device: torch.device,
) -> AttentionStructure:
    """The local-window structure of a layer's mask: ``None`` (no padding), a ``[B, L]``
    padding mask or its SDPA form ``[B, 1, 1, L]``, a ``padding`` structure, or already a
    ``sliding`` structure of this ``window``.

    Raises:
        ValueError: any other visibility (a ``[B, L, L]`` matrix, a causal or packed
            structure): a local layer adds its window to plain padding only.
    """
    if isinstance(mask, AttentionStructure):
        if mask.kind == "sliding" and mask.window == window:
            return mask
        if mask.kind == "padding":
            return AttentionStructure.sliding(mask.real, window)
    elif mask is None:
        return AttentionStructure.sliding(
            torch.ones(batch, length, dtype=torch.bool, device=device), window
        )
    elif mask.dim() == 2:
        return AttentionStructure.sliding(mask.bool(), window)
    elif mask.dim() == 4 and mask.shape[1:3] == (1, 1) and mask.dtype == torch.bool:
        return AttentionStructure.sliding(mask[:, 0, 0, :], window)
    described = mask.kind if isinstance(mask, AttentionStructure) else tuple(mask.shape)
    raise ValueError(
        f"a local (sliding-window) attention layer takes a [B, L] padding mask; got "
        f"{described}. ModernBERT's local layers build their window from the padding"
    )


class RotarySelfAttention(MultiHeadSelfAttention):
    """Multi-head self-attention whose queries and keys are rotated by their positions
    (:class:`~ptm_core.modules.rotary.RotaryEmbedding`), optionally local.

    A local layer (``window`` set) lets a token see the tokens at most ``window`` positions
    away on either side (ModernBERT: ``local_attention // 2``). On the padded path it hands
    the backend a ``sliding`` :class:`AttentionStructure` (flex builds a block-sparse mask
    from it; SDPA the boolean mask every structure kind gets there); on the unpadded path
    the window goes to the packed kernel (:func:`~ptm_core.modules.unpadding.packed_attention`).
    Positions are ``0 .. L-1`` of the padded row on both paths.

    Args:
        hidden_size: model width ``D``.
        num_heads: heads ``h``.
        theta: the rotary base (ModernBERT: 160 000 global, 10 000 local).
        window: how far a token sees to each side; ``None`` = a global layer.
        dropout: dropout on the attention probabilities.
        bias: whether the projections have biases (ModernBERT: ``attention_bias``, no).
        backend: the kernel for structure masks (see :class:`MultiHeadSelfAttention`).
        dropout_kernel: the attention-dropout kernel.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        *,
        theta: float,
        window: int | None = None,
        dropout: float = 0.0,
        bias: bool = False,
        backend: str = "auto",
        dropout_kernel: str | None = None,
    ) -> None:
        super().__init__(
            hidden_size,
            num_heads,
            dropout,
            bias=bias,
            backend=backend,
            dropout_kernel=dropout_kernel,
        )
        if window is not None and window < 0:
            raise ValueError(f"RotarySelfAttention: window must be >= 0 or None, got {window}")
        self.rotary = RotaryEmbedding(self.head_dim, theta)
        self.window = window

    def forward(
        self,
        hidden_states: Tensor,
        mask: Tensor | AttentionStructure | None = None,
        return_scores: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        batch, length, _ = hidden_states.shape
        qkv = self.qkv_proj(hidden_states).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, L, d)
        positions = torch.arange(length, device=hidden_states.device)
        query, key = self.rotary(query, key, positions)
        if self.window is not None:
            mask = sliding_structure(mask, batch, length, self.window, hidden_states.device)
        return self.attend_split(query, key, value, mask, return_scores)

    def forward_unpadded(self, hidden_states: Tensor, layout: UnpadLayout) -> Tensor:
        """Packed real tokens ``(T, D) -> (T, D)``, rotated by their padded-row positions."""
        qkv = self.qkv_proj(hidden_states).view(-1, 3, self.num_heads, self.head_dim)
        query, key = self.rotary(qkv[:, 0], qkv[:, 1], layout.positions, heads_first=False)
        qkv = torch.stack((query, key, qkv[:, 2]), dim=1)  # (T, 3, h, d)
        dropout = self.dropout if self.training else 0.0
        context = layout.attend(qkv, dropout, self.scale, self.dropout_kernel, window=self.window)
        return self.out_proj(context)

    def extra_repr(self) -> str:
        return f"heads={self.num_heads}, window={self.window}"
