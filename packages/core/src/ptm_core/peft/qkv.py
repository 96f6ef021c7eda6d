"""Separate query, key and value projections for the time an adapter is attached.

ptm's :class:`~ptm_core.modules.attention.MultiHeadSelfAttention` computes query, key and
value with one fused ``D -> 3D`` projection. A LoRA of rank ``r`` on that fused layer is not
the LoRA users know (one ``A`` shared by the three, and ``B`` mixing them); LoRA on BERT
adapts ``query``/``key``/``value`` separately. :func:`split_qkv` swaps each fused projection
for :class:`SplitQKVProjection`, three ``nn.Linear`` named ``query``, ``key``, ``value`` that
return the same concatenated output, so ``peft`` wraps each on its own; :func:`fuse_qkv`
puts the fused layer back (after LoRA was merged) for saving or export.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention


class SplitQKVProjection(nn.Module):
    """A fused ``D -> 3 h d`` projection as three named linears (query, key, value).

    Args:
        fused: the attention's ``qkv_proj``; its weights are copied (rows ``[q; k; v]``).

    Shapes:
        input ``(..., D)``; output ``(..., 3 h d)``, the fused layer's layout.
    """

    # nn.Linear until peft wraps them (then its LoRA/IA3 layers, which call the linear).
    query: nn.Module
    key: nn.Module
    value: nn.Module

    def __init__(self, fused: nn.Linear) -> None:
        super().__init__()
        inner = fused.out_features // 3

        def part(index: int) -> nn.Linear:
            linear = nn.Linear(fused.in_features, inner, bias=fused.bias is not None)
            linear.to(device=fused.weight.device, dtype=fused.weight.dtype)
            rows = slice(index * inner, (index + 1) * inner)
            with torch.no_grad():
                linear.weight.copy_(fused.weight[rows])
                if fused.bias is not None and linear.bias is not None:
                    linear.bias.copy_(fused.bias[rows])
            linear.weight.requires_grad_(fused.weight.requires_grad)
            return linear

        self.query, self.key, self.value = part(0), part(1), part(2)

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.cat([self.query(hidden), self.key(hidden), self.value(hidden)], dim=-1)

    def fused(self) -> nn.Linear:
        """One ``nn.Linear`` with the three weights stacked again (plain linears only:
        merge an adapter first)."""
        parts = [p for p in (self.query, self.key, self.value) if type(p) is nn.Linear]
        if len(parts) != 3:
            raise TypeError(
                "the query/key/value projections still carry an adapter; merge it "
                "(ptm_core.peft.library.merge_adapters) before fusing them"
            )
        first = cast(nn.Linear, parts[0])
        linear = nn.Linear(first.in_features, 3 * first.out_features, bias=first.bias is not None)
        linear.to(device=first.weight.device, dtype=first.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(torch.cat([cast(nn.Linear, p).weight for p in parts]))
            biases = [cast(nn.Linear, p).bias for p in parts]
            if linear.bias is not None:
                linear.bias.copy_(torch.cat([b for b in biases if b is not None]))
        return linear


def split_qkv(module: nn.Module) -> int:
    """Give every self-attention under ``module`` separate query/key/value linears.

    Returns:
        How many attention blocks were split (0 when there were none to split).
    """
    count = 0
    for attention in module.modules():
        if isinstance(attention, MultiHeadSelfAttention) and isinstance(
            attention.qkv_proj, nn.Linear
        ):
            attention.qkv_proj = SplitQKVProjection(attention.qkv_proj)  # type: ignore[assignment]
            count += 1
    return count


def fuse_qkv(module: nn.Module) -> None:
    """Undo :func:`split_qkv`: the fused ``qkv_proj`` the checkpoints name."""
    for attention in module.modules():
        if isinstance(attention, MultiHeadSelfAttention) and isinstance(
            attention.qkv_proj, SplitQKVProjection
        ):
            attention.qkv_proj = attention.qkv_proj.fused()
