"""Packed real tokens: the layout that drops padding, and attention over it.

MosaicBERT (Portes et al., 2023) and ModernBERT (Warner et al., 2024) remove padding
right after the embeddings: every GEMM, LayerNorm, feed-forward and dropout of the stack
then runs on the ``T`` real tokens of the batch instead of ``B * L`` positions, and the
output is re-padded at the end. Only attention needs to know which tokens belong to
which sequence; it reads that from :class:`UnpadLayout`.

The encoder-level setting (``auto`` / ``on`` / ``off``) is
:class:`~ptm_core.modules.execution.ExecutionSettings`' ``unpadding`` (see
:mod:`ptm_core.encoders.unpadding`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.modules.attention_backends import attend_heads

# Attention rows are grouped by length (see :func:`plan_length_groups`): at most this many
# groups, and each extra group must save this share of the single group's attention area.
MAX_LENGTH_GROUPS = 4
MIN_GROUP_SAVING = 0.1


@dataclass(frozen=True)
class LengthGroup:
    """Sequences of similar length that attend together in one compact batch.

    Attributes:
        offset: where the group's ``rows * slots`` positions start in the compact buffer.
        rows: how many sequences the group holds.
        slots: the group's longest sequence (every row is padded to it).
        key_mask: ``(rows, 1, 1, slots)`` bool, True at a row's filled slots; ``None`` when
            every row of the group has ``slots`` tokens. A sequence with no real token keeps
            slot 0 visible (a zero vector) so its softmax is not NaN.
    """

    offset: int
    rows: int
    slots: int
    key_mask: Tensor | None


def plan_length_groups(
    lengths: list[int],
    max_groups: int = MAX_LENGTH_GROUPS,
    min_saving: float = MIN_GROUP_SAVING,
) -> list[list[int]]:
    """Split the rows of a batch into groups of similar length for attention.

    Attention over a compact batch costs about ``rows * slots**2`` per group (scores,
    softmax, dropout and two matmuls over every slot pair). Rows are sorted by length
    (longest first) and cut greedily where a cut saves the most area, while a cut saves at
    least ``min_saving`` of the one-group area and there are fewer than ``max_groups``
    groups: a batch of equal lengths stays one group, a batch with lengths from ``0.4 L``
    to ``L`` is cut in two or three.

    Returns:
        The row indices of each group, longest group first.
    """
    order = sorted(range(len(lengths)), key=lambda row: -lengths[row])
    size = [max(1, lengths[row]) for row in order]

    def area(start: int, end: int) -> int:
        return (end - start) * size[start] ** 2

    spans = [(0, len(order))]
    whole = area(0, len(order))
    while len(spans) < max_groups:
        best = (0, 0, 0)  # saving, span index, cut
        for index, (start, end) in enumerate(spans):
            for cut in range(start + 1, end):
                saving = area(start, end) - area(start, cut) - area(cut, end)
                if saving > best[0]:
                    best = (saving, index, cut)
        saving, index, cut = best
        if saving < min_saving * whole:
            break
        start, end = spans[index]
        spans[index : index + 1] = [(start, cut), (cut, end)]
    return [order[start:end] for start, end in spans]


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
        compact_indices: ``(T,)`` int64, each packed token's position in the compact buffer
            of the re-padded attention path: the :class:`LengthGroup` batches one after
            another, a sequence's tokens in the first slots of its row.
        groups: the length groups (:func:`plan_length_groups`).
    """

    indices: Tensor
    cu_seqlens: Tensor
    max_seqlen: int
    batch_size: int
    seq_len: int
    compact_indices: Tensor
    groups: tuple[LengthGroup, ...]

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
        row_lengths = lengths.tolist()  # one host sync: the grouping is planned in Python
        max_seqlen = max(row_lengths, default=0)
        if max_seqlen == 0:
            raise ValueError("UnpadLayout: the padding mask holds no real token")
        indices = real.flatten().nonzero().squeeze(1)  # (T,)
        cu_seqlens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))  # (B + 1,)
        groups, row_start = [], [0] * batch
        offset = 0
        for rows in plan_length_groups(row_lengths):
            slots = max(1, row_lengths[rows[0]])
            for i, row in enumerate(rows):
                row_start[row] = offset + i * slots
            key_mask: Tensor | None = None
            if any(row_lengths[row] != slots for row in rows):
                visible = torch.tensor([max(1, row_lengths[row]) for row in rows])
                key_mask = (torch.arange(slots)[None, :] < visible[:, None])[:, None, None, :]
                key_mask = key_mask.to(real.device)
            groups.append(LengthGroup(offset, len(rows), slots, key_mask))
            offset += len(rows) * slots
        rank = real.cumsum(dim=1) - 1  # (B, L): slot of each real token in its row
        starts = torch.tensor(row_start, dtype=torch.long, device=real.device)[:, None]
        compact_indices = (starts + rank).flatten().index_select(0, indices)
        return cls(indices, cu_seqlens, max_seqlen, batch, length, compact_indices, tuple(groups))

    @property
    def compact_size(self) -> int:
        """Positions in the compact buffer: the groups' ``rows * slots`` summed."""
        last = self.groups[-1]
        return last.offset + last.rows * last.slots

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

    def attend(
        self,
        qkv: Tensor,
        dropout: float = 0.0,
        scale: float | None = None,
        dropout_kernel: str = "auto",
        window: int | None = None,
    ) -> Tensor:
        """``(T, 3, h, d) -> (T, h * d)``: :func:`packed_attention` over this layout."""
        return packed_attention(qkv, self, dropout, scale, dropout_kernel, window=window)

    @property
    def positions(self) -> Tensor:
        """``(T,)`` each packed token's position in its padded row (``0 .. L-1``): what
        rotary positions and local windows count, so both paths see the same numbers."""
        return self.indices % self.seq_len


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
    qkv: Tensor,
    layout: UnpadLayout,
    dropout: float = 0.0,
    scale: float | None = None,
    dropout_kernel: str = "auto",
    *,
    window: int | None = None,
) -> Tensor:
    """Self-attention of packed tokens, each attending the real tokens of its own sequence.

    On CUDA in fp16/bf16 without attention dropout this is torch's varlen flash kernel
    (``torch.nn.attention.varlen.varlen_attn`` with ``cu_seqlens``). Everywhere else the
    queries, keys and values are placed in compact batches, one per length group
    (:attr:`UnpadLayout.groups`, each ``(rows, h, slots, d)``), each through the same SDPA
    call as the padded path (:func:`attend_heads`) with a key mask, and the context is
    gathered back to the ``T`` tokens. Grouping by length is what makes attention itself
    cheaper: one compact batch padded to the longest sequence costs as much as the padded
    path.

    Args:
        qkv: ``(T, 3, h, d)`` packed queries, keys and values.
        layout: where the tokens come from (:meth:`UnpadLayout.from_mask`).
        dropout: dropout on the attention probabilities (pass 0 in eval mode).
        scale: factor on ``QK^T``; ``None`` = ``1 / sqrt(d)``.
        dropout_kernel: the attention module's dropout kernel (:mod:`ptm_core.modules.dropout`).
        window: local attention (ModernBERT's local layers): a token sees only the tokens of
            its sequence at most ``window`` places away on either side. On the varlen kernel
            this is its ``window_size``; on the grouped path a ``(slots, slots)`` band shared
            by every row of a group. ``None`` = the whole sequence. Within a sequence the
            places are counted among its real tokens: with left or right padding that is the
            padded path's distance.

    Returns:
        ``(T, h * d)`` context, heads merged.
    """
    tokens, _, heads, head_dim = qkv.shape
    if _varlen_usable(qkv, dropout):
        from torch.nn.attention.varlen import varlen_attn

        query, key, value = qkv.unbind(1)  # 3 x (T, h, d)
        cu = layout.cu_seqlens
        sides = (-1, -1) if window is None else (window, window)
        out = varlen_attn(
            query,
            key,
            value,
            cu,
            cu,
            layout.max_seqlen,
            layout.max_seqlen,
            scale=scale,
            window_size=sides,
        )
        return out.reshape(tokens, heads * head_dim)  # type: ignore[union-attr]
    compact = qkv.new_zeros(layout.compact_size, 3, heads, head_dim)
    compact = compact.index_copy(0, layout.compact_indices, qkv)
    contexts = []
    for group in layout.groups:
        positions = group.rows * group.slots
        part = compact[group.offset : group.offset + positions]
        part = part.view(group.rows, group.slots, 3, heads, head_dim)
        query, key, value = part.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (rows, h, slots, d)
        mask = group.key_mask
        if window is not None:
            slot = torch.arange(group.slots, device=qkv.device)
            band = (slot[:, None] - slot[None, :]).abs() <= window  # (slots, slots)
            # An empty slot beyond its row's end + window would see no key (a NaN row, and
            # NaN gradients); it sees itself, a zero vector whose output is dropped.
            mask = band if mask is None else (mask & band) | (slot[:, None] == slot[None, :])
        context = attend_heads(
            query, key, value, mask, dropout, scale, dropout_kernel=dropout_kernel
        )
        contexts.append(context.reshape(positions, heads * head_dim))
    context = contexts[0] if len(contexts) == 1 else torch.cat(contexts)
    return context.index_select(0, layout.compact_indices)
