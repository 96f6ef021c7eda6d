"""Separate query, key and value projections for the time an adapter is attached.

ptm's :class:`~ptm_core.modules.attention.MultiHeadSelfAttention` computes query, key and
value with one fused ``D -> 3D`` projection, and the decoder's
:class:`~ptm_core.modules.cross_attention.MultiHeadCrossAttention` keys and values with one
fused ``D -> 2D`` projection of the encoder output. A LoRA of rank ``r`` on a fused layer is
not the LoRA users know (one ``A`` shared by the parts, and ``B`` mixing them); LoRA on
BERT or BART adapts query, key and value separately. :func:`split_qkv` swaps each fused
projection for :class:`SplitProjection`, named ``nn.Linear`` parts (``query``, ``key``,
``value``) that return the same concatenated output, so ``peft`` wraps each on its own.
Cross-attention's query projection ``q_proj`` becomes a one-part ``SplitProjection``
(``q_proj.query``), so ``query`` names every attention's query, self or cross.
:func:`fuse_qkv` puts the fused layers back (after LoRA was merged) for saving or export.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.cross_attention import MultiHeadCrossAttention

QKV_NAMES = ("query", "key", "value")
KV_NAMES = ("key", "value")
Q_NAMES = ("query",)


class SplitProjection(nn.Module):
    """A fused ``D -> k h d`` projection as ``k`` named linears of equal width.

    Args:
        fused: the fused linear; its weights are copied (rows in ``names`` order).
        names: the parts' names (``query, key, value`` for self-attention's ``qkv_proj``).

    Shapes:
        input ``(..., D)``; output ``(..., k h d)``, the fused layer's layout.
    """

    def __init__(self, fused: nn.Linear, names: Sequence[str] = QKV_NAMES) -> None:
        super().__init__()
        if fused.out_features % len(names):
            raise ValueError(
                f"a fused projection of {fused.out_features} outputs does not split into "
                f"{len(names)} equal parts {tuple(names)}"
            )
        inner = fused.out_features // len(names)
        self.names = tuple(names)
        for index, name in enumerate(self.names):
            linear = nn.Linear(fused.in_features, inner, bias=fused.bias is not None)
            linear.to(device=fused.weight.device, dtype=fused.weight.dtype)
            rows = slice(index * inner, (index + 1) * inner)
            with torch.no_grad():
                linear.weight.copy_(fused.weight[rows])
                if fused.bias is not None and linear.bias is not None:
                    linear.bias.copy_(fused.bias[rows])
            linear.weight.requires_grad_(fused.weight.requires_grad)
            # nn.Linear until peft wraps it (then its LoRA/IA3 layer, which calls the linear).
            self.add_module(name, linear)

    def parts(self) -> list[nn.Module]:
        """The part modules, in output order."""
        return [cast(nn.Module, getattr(self, name)) for name in self.names]

    def forward(self, hidden: Tensor) -> Tensor:
        outputs = [part(hidden) for part in self.parts()]
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)

    def fused(self) -> nn.Linear:
        """One ``nn.Linear`` with the parts' weights stacked again (plain linears only:
        merge an adapter first)."""
        parts = [p for p in self.parts() if type(p) is nn.Linear]
        if len(parts) != len(self.names):
            raise TypeError(
                f"the {'/'.join(self.names)} projections still carry an adapter; merge it "
                "(ptm_core.peft.library.merge_adapters) before fusing them"
            )
        linears = cast(list[nn.Linear], parts)
        first = linears[0]
        out = len(linears) * first.out_features
        linear = nn.Linear(first.in_features, out, bias=first.bias is not None)
        linear.to(device=first.weight.device, dtype=first.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(torch.cat([p.weight for p in linears]))
            if linear.bias is not None:
                linear.bias.copy_(torch.cat([p.bias for p in linears if p.bias is not None]))
        return linear


# The fused projections of each attention block and the names their parts take.
_FUSED: tuple[tuple[type[nn.Module], str, tuple[str, ...]], ...] = (
    (MultiHeadSelfAttention, "qkv_proj", QKV_NAMES),
    (MultiHeadCrossAttention, "q_proj", Q_NAMES),
    (MultiHeadCrossAttention, "kv_proj", KV_NAMES),
)


def split_qkv(module: nn.Module) -> int:
    """Give every self- and cross-attention under ``module`` separate query/key/value
    linears.

    Returns:
        How many projections were split (0 when there were none to split).
    """
    count = 0
    for attention in module.modules():
        for kind, attribute, names in _FUSED:
            fused = getattr(attention, attribute, None)
            if isinstance(attention, kind) and isinstance(fused, nn.Linear):
                setattr(attention, attribute, SplitProjection(fused, names))
                count += 1
    return count


def fuse_qkv(module: nn.Module) -> None:
    """Undo :func:`split_qkv`: the fused projections the checkpoints name."""
    for attention in module.modules():
        for kind, attribute, _ in _FUSED:
            split = getattr(attention, attribute, None)
            if isinstance(attention, kind) and isinstance(split, SplitProjection):
                setattr(attention, attribute, split.fused())
