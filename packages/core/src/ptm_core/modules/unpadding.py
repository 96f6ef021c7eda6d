"""Packed real tokens: the layout that drops padding, and attention over it.

MosaicBERT (Portes et al., 2023) and ModernBERT (Warner et al., 2024) remove padding
right after the embeddings: every GEMM, LayerNorm, feed-forward and dropout of the stack
then runs on the ``T`` real tokens of the batch instead of ``B * L`` positions, and the
output is re-padded at the end. Only attention needs to know which tokens belong to
which sequence; it reads that from :class:`UnpadLayout`.

The encoder-level switch (``auto`` / ``on`` / ``off``) is
:func:`ptm_core.encoders.unpadding.set_unpadding`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.modules.attention import attend_heads


@dataclass(frozen=True)
class UnpadLayout:
    """Where the real tokens of a ``[B, L]`` batch are.

    Real tokens need not be left-aligned: any ``[B, L]`` padding mask works (right or
    left padding, holes). Tokens keep their order within a sequence.

    Attributes:
        indices: ``(T,)`` int64, positions of the real tokens in the flattened ``[B * L]``
            batch, row by row.
        cu_seqlens: ``(B + 1,)`` int32 cumulative sequence lengths (``cu_seqlens[b]`` is
            where sequence ``b`` starts among the ``T`` packed tokens), as varlen flash
            kernels take them.
        max_seqlen: the longest sequence's number of real tokens.
        batch_size: ``B``.
        seq_len: ``L``.
        compact_indices: ``(T,)`` int64, each packed token's position in a compact
            ``[B * max_seqlen]`` batch where sequence ``b``'s tokens fill the first
            ``len_b`` slots of its row (what the re-padded attention path uses).
        key_mask: ``(B, 1, 1, max_seqlen)`` bool, True at the filled slots of the compact
            batch; ``None`` when every sequence has ``max_seqlen`` tokens. A sequence with
            no real token keeps slot 0 visible (a zero vector) so its softmax is not NaN.
    """

    indices: Tensor
    cu_seqlens: Tensor
    max_seqlen: int
    batch_size: int
    seq_len: int
    compact_indices: Tensor
    key_mask: Tensor | None

    @classmethod
    def from_mask(cls, padding_mask: Tensor) -> UnpadLayout:
        """Build the layout of a ``[B, L]`` padding mask (bool or 0/1; 1/True = real token).

        Raises:
            ValueError: the mask is not ``[B, L]`` or holds no real token.
        """
        if padding_mask.dim() != 2:
            raise ValueError(
                f"UnpadLayout needs a [B, L] padding mask, got shape {tuple(padding_mask.shape)}"
            )
        real = padding_mask.bool()
        batch, length = real.shape
        lengths = real.sum(dim=1)  # (B,)
        max_seqlen = int(lengths.max()) if batch else 0
        if max_seqlen == 0:
            raise ValueError("UnpadLayout: the padding mask holds no real token")
        indices = real.flatten().nonzero().squeeze(1)  # (T,)
        cu_seqlens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))  # (B + 1,)
        rank = real.cumsum(dim=1) - 1  # (B, L): slot of each real token in its row
        rows = torch.arange(batch, device=real.device)[:, None] * max_seqlen
        compact_indices = (rows + rank).flatten().index_select(0, indices)
        key_mask: Tensor | None = None
        if bool((lengths != max_seqlen).any()):
            slots = torch.arange(max_seqlen, device=real.device)
            key_mask = (slots[None, :] < lengths.clamp(min=1)[:, None])[:, None, None, :]
        return cls(indices, cu_seqlens, max_seqlen, batch, length, compact_indices, key_mask)

    @property
    def num_tokens(self) -> int:
        """``T``, the number of real tokens."""
        return int(self.indices.numel())

    def unpad(self, x: Tensor) -> Tensor:
        """``(B, L, ...) -> (T, ...)``: the real positions, row by row."""
        return x.reshape(self.batch_size * self.seq_len, *x.shape[2:]).index_select(0, self.indices)

    def repad(self, x: Tensor) -> Tensor:
        """``(T, ...) -> (B, L, ...)``, zeros at the padding positions."""
        flat = x.new_zeros(self.batch_size * self.seq_len, *x.shape[1:])
        return flat.index_copy(0, self.indices, x).view(self.batch_size, self.seq_len, *x.shape[1:])

    def attend(self, qkv: Tensor, dropout: float = 0.0, scale: float | None = None) -> Tensor:
        """``(T, 3, h, d) -> (T, h * d)``: :func:`packed_attention` over this layout."""
        return packed_attention(qkv, self, dropout, scale)


def _varlen_usable(qkv: Tensor, dropout: float) -> bool:
    """Whether torch's varlen flash kernel can run this call (CUDA, half precision, no
    attention dropout: ``varlen_attn`` has no dropout argument)."""
    if not qkv.is_cuda or dropout > 0.0 or qkv.dtype not in (torch.float16, torch.bfloat16):
        return False
    head_dim = qkv.shape[-1]
    if head_dim % 8 or head_dim > 256:
        return False
    try:
        from torch.nn.attention.varlen import varlen_attn  # noqa: F401
    except ImportError:  # torch < 2.10
        return False
    return True


def packed_attention(
    qkv: Tensor, layout: UnpadLayout, dropout: float = 0.0, scale: float | None = None
) -> Tensor:
    """Self-attention of packed tokens, each attending the real tokens of its own sequence.

    On CUDA in fp16/bf16 without attention dropout this is torch's varlen flash kernel
    (``torch.nn.attention.varlen.varlen_attn`` with ``cu_seqlens``). Everywhere else the
    queries, keys and values are placed in a compact ``(B, h, max_seqlen, d)`` batch and
    go through the same SDPA call as the padded path (:func:`attend_heads`) with a key
    mask, and the context is gathered back to the ``T`` tokens.

    Args:
        qkv: ``(T, 3, h, d)`` packed queries, keys and values.
        layout: where the tokens come from (:meth:`UnpadLayout.from_mask`).
        dropout: dropout on the attention probabilities (pass 0 in eval mode).
        scale: factor on ``QK^T``; ``None`` = ``1 / sqrt(d)``.

    Returns:
        ``(T, h * d)`` context, heads merged.
    """
    tokens, _, heads, head_dim = qkv.shape
    if _varlen_usable(qkv, dropout):
        from torch.nn.attention.varlen import varlen_attn

        query, key, value = qkv.unbind(1)  # 3 x (T, h, d)
        cu = layout.cu_seqlens
        out = varlen_attn(
            query, key, value, cu, cu, layout.max_seqlen, layout.max_seqlen, scale=scale
        )
        return out.reshape(tokens, heads * head_dim)  # type: ignore[union-attr]
    batch, slots = layout.batch_size, layout.max_seqlen
    compact = qkv.new_zeros(batch * slots, 3, heads, head_dim)
    compact = compact.index_copy(0, layout.compact_indices, qkv).view(
        batch, slots, 3, heads, head_dim
    )
    query, key, value = compact.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, M, d)
    context = attend_heads(query, key, value, layout.key_mask, dropout, scale)  # (B, M, h*d)
    return context.reshape(batch * slots, heads * head_dim).index_select(0, layout.compact_indices)
