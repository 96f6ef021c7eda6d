"""Transformer-XL relative-position attention, with XLNet's two streams and segments.

Transformer-XL (Dai et al., 2019) drops the absolute position table. The score of query
``i`` against key ``j`` is the sum of

* ``(q_i + u) . k_j``: content, with a learned global content bias ``u``;
* ``(q_i + v) . W_r R_{i-j}``: relative position, where ``R`` is a sinusoid of the
  distance ``i - j`` and ``v`` a learned global position bias;
* (XLNet, Yang et al., 2019) ``(q_i + b) . s_{ij}``: relative segment, where ``s_ij`` is
  one of two learned vectors, "same segment" or "different segment".

Keys and values come from the current segment and, with recurrence, the cached memory of
the previous one. XLNet's two-stream attention runs a second set of queries (the query
stream ``g``) against the same keys and values: the query stream knows a token's
position but not its content.

The content term goes through :func:`torch.nn.functional.scaled_dot_product_attention`
with ``u`` folded into the query; the position and segment terms are its additive
``attn_mask`` (together with the visibility mask), so the softmax and the value product
use the fused kernels.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ptm_core.modules.attention_backends import attend_heads, head_size
from ptm_core.modules.dropout import check_dropout_kernel, default_dropout_kernel

if TYPE_CHECKING:
    from ptm_core.modules.execution import ExecutionSettings


def sinusoid_relative_positions(
    query_length: int,
    key_length: int,
    dim: int,
    *,
    device: torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Sinusoidal encodings of every relative distance a query can have to a key.

    Row ``t`` encodes the distance ``key_length - t``, for ``t = 0 .. key_length +
    query_length - 1`` (distances ``key_length`` down to ``-query_length + 1``), as
    ``[sin(d * f), cos(d * f)]`` with ``f_k = 1 / 10000^(2k / dim)`` (Transformer-XL,
    XLNet's bidirectional ``attn_type="bi"``).

    Args:
        query_length: ``L``, tokens of the current segment.
        key_length: ``K = M + L`` with ``M`` memory positions.
        dim: model width ``D`` (even).
        device: where to build it.
        dtype: result dtype.

    Returns:
        ``(K + L, D)``.
    """
    if dim % 2:
        raise ValueError(f"relative position encodings need an even width, got {dim}")
    freq = torch.arange(0, dim, 2, device=device, dtype=torch.float32)
    inv_freq = 1.0 / torch.pow(10000.0, freq / dim)
    distances = torch.arange(key_length, -query_length, -1, device=device, dtype=torch.float32)
    angles = distances[:, None] * inv_freq[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=-1).to(dtype)


def relative_index(query_positions: Tensor, query_length: int, key_length: int) -> Tensor:
    """Rows of :func:`sinusoid_relative_positions` for each (query, key) pair.

    A query at position ``p`` of the current segment sits at ``M + p`` among the keys
    (``M = key_length - query_length`` memory positions before it); its distance to key
    ``j`` is ``M + p - j``, which is row ``query_length - p + j``. This gather replaces
    Transformer-XL's "relative shift" reshaping trick and also serves query-stream rows
    at arbitrary positions.

    Args:
        query_positions: ``(B, P)`` or ``(P,)`` positions ``0 .. L-1`` of the queries.
        query_length: ``L``.
        key_length: ``K``.

    Returns:
        Same leading shape as ``query_positions`` plus ``(K,)``: long indices.
    """
    keys = torch.arange(key_length, device=query_positions.device)
    return (query_length - query_positions)[..., None] + keys


class RelativeMultiHeadAttention(nn.Module):
    """Multi-head attention with Transformer-XL relative positions and XLNet segments.

    Projections have no biases (Transformer-XL / XLNet). ``u`` (``content_bias``),
    ``v`` (``position_bias``) and, with ``relative_segments``, ``b`` (``segment_bias``)
    and the two segment vectors (``segment_embeddings``) are per head.

    Args:
        hidden_size: model width ``D``.
        num_heads: heads ``h`` (``D`` divisible by ``h``).
        dropout: dropout on the attention probabilities (training only).
        relative_segments: score same/different segment (XLNet).

    Shapes (``B`` batch, ``L`` segment length, ``M`` memory length, ``K = M + L``, ``P``
    query-stream positions):
        content ``(B, L, D)``; memory ``(B, M, D)`` or ``None``; positions ``(K + L, D)``
        from :func:`sinusoid_relative_positions`; content_mask bool ``(B, L, K)``
        (True = may attend) or ``None``; segment_diff bool ``(B, L, K)`` (True = other
        segment) or ``None``; query ``(B, P, D)``, query_positions ``(B, P)`` long,
        query_mask bool ``(B, P, K)``. Returns ``(content_out (B, L, D), query_out (B, P, D)
        or None)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        relative_segments: bool = False,
        dropout_kernel: str | None = None,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_size(hidden_size, num_heads)
        self.dropout = dropout
        self.dropout_kernel = (
            default_dropout_kernel()
            if dropout_kernel is None
            else check_dropout_kernel(dropout_kernel)
        )
        self.query_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.key_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.position_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=False)
        self.content_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.position_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
        self.segment_bias: nn.Parameter | None = None
        self.segment_embeddings: nn.Parameter | None = None
        if relative_segments:
            self.segment_bias = nn.Parameter(torch.zeros(num_heads, self.head_dim))
            self.segment_embeddings = nn.Parameter(torch.zeros(2, num_heads, self.head_dim))
        self.reset_biases()

    def apply_execution_settings(self, settings: ExecutionSettings) -> None:
        """Take ``settings``' dropout kernel, when it names one (no structure masks here)."""
        if settings.dropout_kernel is not None:
            self.dropout_kernel = settings.dropout_kernel

    def reset_biases(self, std: float = 0.02) -> None:
        """Draw ``u``, ``v``, ``b`` and the segment vectors from ``N(0, std)`` (as XLNet)."""
        for parameter in (
            self.content_bias,
            self.position_bias,
            self.segment_bias,
            self.segment_embeddings,
        ):
            if parameter is not None:
                nn.init.normal_(parameter, mean=0.0, std=std)

    def _heads(self, x: Tensor) -> Tensor:
        """``(B, N, D) -> (B, h, N, d)``."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def _attend(
        self,
        query: Tensor,
        positions_of_queries: Tensor,
        key: Tensor,
        value: Tensor,
        position_keys: Tensor,
        mask: Tensor | None,
        segment_diff: Tensor | None,
        query_length: int,
    ) -> Tensor:
        """One stream's attention: ``query`` ``(B, h, P, d)`` at positions ``(B, P)`` ->
        context ``(B, P, D)``."""
        batch, heads, count, head_dim = query.shape
        key_length = key.shape[2]
        scale = 1.0 / math.sqrt(head_dim)
        # Position term: every query against every relative distance, then gather the
        # distance of each (query, key) pair.
        by_distance = torch.einsum(
            "bhpd,rhd->bhpr", query + self.position_bias[:, None, :], position_keys
        )  # (B, h, P, K + L)
        index = relative_index(positions_of_queries, query_length, key_length)  # (B, P, K)
        bias = by_distance.gather(-1, index[:, None].expand(batch, heads, count, key_length))
        if segment_diff is not None and self.segment_embeddings is not None:
            assert self.segment_bias is not None
            per_kind = torch.einsum(
                "bhpd,shd->bhps", query + self.segment_bias[:, None, :], self.segment_embeddings
            )  # (B, h, P, 2): same segment, other segment
            bias = bias + torch.where(segment_diff[:, None], per_kind[..., 1:2], per_kind[..., 0:1])
        bias = bias * scale
        blind: Tensor | None = None
        if mask is not None:
            # A finite floor, not -inf, keeps a row that may see nothing NaN-free ...
            bias = bias.masked_fill(~mask[:, None], torch.finfo(bias.dtype).min)
            blind = ~mask.any(dim=-1)  # (B, P)
        context = attend_heads(
            query + self.content_bias[:, None, :],
            key,
            value,
            bias.to(query.dtype),
            self.dropout if self.training else 0.0,
            dropout_kernel=self.dropout_kernel,
        )  # (B, P, h*d)
        if blind is not None and bool(blind.any()):
            # ... and its context is zero: the query stream of the first token of a
            # factorisation order knows nothing but its position. (XLNet's code lets
            # such a row attend uniformly to every token, its own content included.)
            context = context.masked_fill(blind[:, :, None], 0.0)
        return context

    def forward(
        self,
        content: Tensor,
        positions: Tensor,
        content_mask: Tensor | None = None,
        *,
        memory: Tensor | None = None,
        segment_diff: Tensor | None = None,
        query: Tensor | None = None,
        query_positions: Tensor | None = None,
        query_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        batch, length, _ = content.shape
        keys_input = content if memory is None else torch.cat([memory, content], dim=1)
        key = self._heads(self.key_proj(keys_input))  # (B, h, K, d)
        value = self._heads(self.value_proj(keys_input))
        position_keys = self.position_proj(positions).view(-1, self.num_heads, self.head_dim)
        content_positions = torch.arange(length, device=content.device).expand(batch, length)
        attended = self._attend(
            self._heads(self.query_proj(content)),
            content_positions,
            key,
            value,
            position_keys,
            content_mask,
            segment_diff,
            length,
        )
        content_out = self.out_proj(attended)
        if query is None:
            return content_out, None
        if query_positions is None or query_mask is None:
            raise ValueError("the query stream needs query_positions and query_mask")
        query_segments = None
        if segment_diff is not None:
            rows = query_positions[:, :, None].expand(-1, -1, segment_diff.shape[-1])
            query_segments = segment_diff.gather(1, rows)  # (B, P, K)
        attended_g = self._attend(
            self._heads(self.query_proj(query)),
            query_positions,
            key,
            value,
            position_keys,
            query_mask,
            query_segments,
            length,
        )
        query_out = self.out_proj(attended_g)
        return content_out, query_out
