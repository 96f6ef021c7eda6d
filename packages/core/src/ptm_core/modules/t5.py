"""T5's layer parts (Raffel et al., 2020): RMS norm, bucketed relative position bias, gated FFN.

The Transformer layers themselves are the core ones
(:class:`~ptm_core.encoders.TransformerLayer`, :class:`~ptm_core.encoders.decoder.DecoderLayer`);
these are the pieces they switch to for the T5 layout:

- :class:`RMSNorm` (``T5LayerNorm``): scale-only normalisation, no mean, no bias.
- :func:`relative_position_bucket` and :class:`RelativePositionBias`: one learned scalar
  per head and log-spaced distance bucket, added to the attention logits. It is computed
  once per stack and shared by all its layers; :func:`bias_mask` folds it into the
  padding/causal visibility as one additive float mask for SDPA.
- :class:`GatedFeedForward` (T5 v1.1's gated-GELU feed-forward).
- :func:`init_t5_weights`: T5's initialisation, which absorbs the ``1/sqrt(d)`` that its
  attention leaves out.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.cross_attention import MultiHeadCrossAttention
from ptm_core.modules.feed_forward import FeedForward, get_activation

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


def init_t5_weights(module: nn.Module, hidden_size: int) -> None:
    """Re-initialise the layers below ``module`` as T5 does (Mesh TensorFlow, factor 1).

    Token tables and an untied ``lm_head`` get ``N(0, 1)``; attention queries
    ``N(0, (D d)^-1/2)`` (the ``1/sqrt(d)`` T5 leaves out of its logits), keys, values
    and outputs ``N(0, D^-1/2)``; feed-forward inputs ``N(0, D^-1/2)`` and outputs
    ``N(0, F^-1/2)``; position-bias tables ``N(0, D^-1/2)``; norms 1, biases 0. T5's
    unscaled attention and ``D^-1/2``-scaled tied LM head then start from unit-scale
    logits.

    Args:
        module: the model (or a part of it).
        hidden_size: ``D``.
    """
    for child in module.modules():
        if isinstance(child, MultiHeadSelfAttention | MultiHeadCrossAttention):
            width = child.num_heads * child.head_dim
            if isinstance(child, MultiHeadSelfAttention):
                query, key_value = child.qkv_proj, child.qkv_proj
            else:
                query, key_value = child.q_proj, child.kv_proj
            with torch.no_grad():
                query.weight[:width].normal_(0.0, (hidden_size * child.head_dim) ** -0.5)
                if key_value is query:
                    key_value.weight[width:].normal_(0.0, hidden_size**-0.5)
                else:
                    key_value.weight.normal_(0.0, hidden_size**-0.5)
                child.out_proj.weight.normal_(0.0, width**-0.5)
            linears = [query, key_value, child.out_proj]
        elif isinstance(child, FeedForward | GatedFeedForward):
            linears = [child.w_in, child.w_out]
            if isinstance(child, GatedFeedForward):
                linears.append(child.w_gate)
            for linear in linears:
                nn.init.normal_(linear.weight, 0.0, linear.in_features**-0.5)
        elif isinstance(child, RMSNorm | nn.LayerNorm):
            if child.weight is not None:
                nn.init.ones_(child.weight)
            norm_bias = getattr(child, "bias", None)
            if isinstance(norm_bias, Tensor):
                nn.init.zeros_(norm_bias)
            continue
        else:
            continue
        for linear in linears:
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
    position_tables = {
        id(child.embedding) for child in module.modules() if isinstance(child, RelativePositionBias)
    }
    for child in module.modules():
        if isinstance(child, nn.Embedding):
            std = hidden_size**-0.5 if id(child) in position_tables else 1.0
            nn.init.normal_(child.weight, 0.0, std)
    head = getattr(module, "lm_head", None)
    if isinstance(head, nn.Linear):
        # Tied: the token table just drawn; untied (T5 v1.1): its own N(0, 1).
        tables = [child.weight for child in module.modules() if isinstance(child, nn.Embedding)]
        if all(head.weight is not table for table in tables):
            nn.init.normal_(head.weight, 0.0, 1.0)
