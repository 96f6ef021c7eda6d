"""T5's bucketed relative position bias (Raffel et al., 2020).

:func:`relative_position_bucket` and :class:`RelativePositionBias`: one learned scalar per
head and log-spaced distance bucket, added to the attention logits. It is computed once
per stack and shared by all its layers; :func:`bias_mask` folds it into the
padding/causal visibility as one additive float mask for SDPA.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def relative_position_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """Map key-minus-query distances to T5's log-spaced buckets.

    Bidirectional (encoder): half of the buckets are for keys after the query, half for
    keys at or before it. Unidirectional (decoder self-attention): only keys at or before
    the query count, later ones fall in bucket 0 (the causal mask hides them anyway).
    Within a direction, the first half of the ``n`` buckets are exact distances
    ``0 .. n/2 - 1``; the rest cover ``n/2 .. max_distance`` logarithmically, and every
    larger distance shares the last bucket.

    Args:
        relative_position: integer tensor of ``key_position - query_position``.
        bidirectional: encoder (True) or causal decoder (False).
        num_buckets: buckets in all (both directions together when bidirectional).
        max_distance: distance from which all positions share the last bucket.

    Returns:
        Long tensor of the same shape with values in ``[0, num_buckets)``.
    """
    buckets = torch.zeros_like(relative_position, dtype=torch.long)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    is_small = distance < max_exact
    # log(0) for distance 0 is -inf; those entries take the `is_small` branch.
    scaled = torch.log(distance.float() / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (scaled * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance.long(), large)


class RelativePositionBias(nn.Module):
    """T5's relative position bias: one learned scalar per head and distance bucket.

    ``bias[h, i, j] = table[bucket(j - i), h]``, added to the attention logits of every
    layer of one stack (the table belongs to the stack's first layer in T5; ptm keeps it
    on the stack and computes it once per forward pass).

    Args:
        num_heads: attention heads ``h``.
        num_buckets: distance buckets (T5: 32).
        max_distance: distance that reaches the last bucket (T5: 128).
        bidirectional: encoder self-attention (True) or causal decoder self-attention.

    Shapes:
        output ``(1, h, Lq, Lk)``.
    """

    def __init__(
        self, num_heads: int, num_buckets: int = 32, max_distance: int = 128, *, bidirectional: bool
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(num_buckets, num_heads)
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bidirectional

    def forward(self, query_length: int, key_length: int, query_offset: int = 0) -> Tensor:
        """The bias of queries at ``query_offset .. query_offset + Lq - 1`` over keys ``0 .. Lk - 1``.

        A decoder step with ``P`` cached positions passes ``query_offset=P`` and
        ``key_length=P + T``: the rows of the new positions against every cached and new key.
        """
        device = self.embedding.weight.device
        query = torch.arange(query_offset, query_offset + query_length, device=device)
        key = torch.arange(key_length, device=device)
        buckets = relative_position_bucket(
            key[None, :] - query[:, None],
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )  # (Lq, Lk)
        return self.embedding(buckets).permute(2, 0, 1).unsqueeze(0)  # (1, h, Lq, Lk)


def bias_mask(bias: Tensor, visible: Tensor | None) -> Tensor:
    """Fold a boolean visibility mask into an additive attention bias, for SDPA.

    Args:
        bias: ``(1, h, Lq, Lk)`` float logits bias.
        visible: ``None`` or bool broadcastable to ``(B, 1, Lq, Lk)`` (True = may attend).

    Returns:
        Float ``(1 or B, h, Lq, Lk)``: ``bias`` where visible, the dtype's most negative
        finite value elsewhere (not ``-inf``: a row with no visible key stays finite).
    """
    if visible is None:
        return bias
    return bias.masked_fill(~visible, torch.finfo(bias.dtype).min)
