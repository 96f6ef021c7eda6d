"""Multi-head self-attention on top of ``scaled_dot_product_attention``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn

from ptm_core.modules.attention_backends import attend, attend_heads, check_backend, head_size
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.dropout import check_dropout_kernel, default_dropout_kernel
from ptm_core.modules.dropout import dropout as cheap_dropout
from ptm_core.modules.unpadding import UnpadLayout

if TYPE_CHECKING:
    from ptm_core.modules.execution import ExecutionSettings

__all__ = ["MultiHeadSelfAttention", "attend_heads", "head_size"]


class MultiHeadSelfAttention(nn.Module):
    """Multi-head scaled dot-product self-attention (Vaswani et al., 2017).

    Query, key and value are one fused projection (one GEMM instead of three); the
    Hugging Face BERT checkpoint mapping concatenates and splits them explicitly. The
    kernel is :func:`torch.nn.functional.scaled_dot_product_attention`, so the fused
    flash/memory-efficient paths are used whenever the mask and dropout allow it.
    ``return_scores=True`` takes an explicit path instead (``softmax(QK^T / sqrt(d))V``
    written out) that also returns the pre-softmax scores, which attention distillation
    (TinyBERT) and probing need; the two paths agree to float rounding.

    Args:
        hidden_size: model width ``D``.
        num_heads: number of heads ``h``; ``D`` must be divisible by ``h``.
        dropout: dropout on the attention probabilities (training only).
        bias: whether the projections have biases (T5: no).
        scale: whether ``QK^T`` is divided by ``sqrt(d)`` (T5: no; its initialisation
            absorbs the factor).
        head_dim: width ``d`` of one head when it is not ``D / h``: a layer whose heads
            were pruned (Michel et al., 2019) keeps ``h' < h`` heads of the original width,
            so its projections are ``D -> 3 h' d`` and ``h' d -> D``. ``None`` = ``D / h``.
        backend: the kernel for structure masks (see above).
        dropout_kernel: the attention-dropout kernel (:mod:`ptm_core.modules.dropout`);
            ``None`` = :func:`~ptm_core.modules.dropout.default_dropout_kernel`.

    Shapes:
        hidden_states ``(B, L, D)``; mask ``None``, ``(B, 1, 1, L)`` or ``(B, 1, L, L)``
        bool (True = may attend, as built by :func:`to_sdpa_mask`), or an additive float
        mask ``(B or 1, h, L, L)`` (T5's position bias with the padding folded in, see
        :func:`~ptm_core.modules.positions.bias_mask`); output ``(B, L, D)``;
        with ``return_scores`` also the scores ``(B, h, L, L)``, where positions a row may
        not attend hold the dtype's most negative finite value.

    The mask may also be an :class:`~ptm_core.modules.attention_structure.AttentionStructure`
    (the mask described by per-token ``[B, L]`` tensors); ``backend`` (one of
    :data:`~ptm_core.modules.attention_backends.ATTENTION_BACKENDS`, default ``"auto"``)
    picks the kernel that runs it. Tensor masks always take the SDPA path.

    Incremental decoding (a decoder generating one token at a time) goes through
    :meth:`forward_cached`, which attends new positions over cached keys/values of the
    earlier ones; :meth:`forward` never reads or keeps a cache.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        scale: bool = True,
        head_dim: int | None = None,
        *,
        backend: str = "auto",
        dropout_kernel: str | None = None,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_size(hidden_size, num_heads) if head_dim is None else head_dim
        self.dropout = dropout
        # None = SDPA's default 1 / sqrt(d).
        self.scale: float | None = None if scale else 1.0
        inner = num_heads * self.head_dim  # D unless heads were pruned
        self.attention_backend = check_backend(backend)
        self.dropout_kernel = (
            default_dropout_kernel()
            if dropout_kernel is None
            else check_dropout_kernel(dropout_kernel)
        )
        self.qkv_proj = nn.Linear(hidden_size, 3 * inner, bias=bias)
        self.out_proj = nn.Linear(inner, hidden_size, bias=bias)

    def apply_execution_settings(self, settings: ExecutionSettings) -> None:
        """Run with ``settings``' backend (and dropout kernel, when it names one)."""
        self.attention_backend = settings.attention_backend
        if settings.dropout_kernel is not None:
            self.dropout_kernel = settings.dropout_kernel

    def forward(
        self,
        hidden_states: Tensor,
        mask: Tensor | AttentionStructure | None = None,
        return_scores: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        batch, length, _ = hidden_states.shape
        qkv = self.qkv_proj(hidden_states).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, L, d)
        return self.attend_split(query, key, value, mask, return_scores)

    def attend_split(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | AttentionStructure | None = None,
        return_scores: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """:meth:`forward` after the projection: attention over split heads
        ``(B, h, L, d)``, then the output projection ``(B, L, D)``. A subclass that changes
        queries and keys (rotary positions) calls this after its own projection."""
        batch, _, length, _ = query.shape
        if isinstance(mask, AttentionStructure):
            mask.check_length(length)
            if return_scores:  # the explicit path reads the dense reference mask
                mask = mask.to(query.device).reference_mask()
            else:
                dropout = self.dropout if self.training else 0.0
                context = attend(
                    query,
                    key,
                    value,
                    mask,
                    dropout,
                    self.scale,
                    self.attention_backend,
                    dropout_kernel=self.dropout_kernel,
                )
                return self.out_proj(context.transpose(1, 2).reshape(batch, length, -1))
        if return_scores:
            factor = 1.0 / math.sqrt(self.head_dim) if self.scale is None else self.scale
            scores = query @ key.transpose(-1, -2) * factor  # (B, h, L, L)
            if mask is not None and mask.dtype != torch.bool:
                scores = (scores + mask).clamp(min=torch.finfo(scores.dtype).min)
            elif mask is not None:
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            probs = cheap_dropout(
                scores.softmax(dim=-1), self.dropout, self.training, self.dropout_kernel
            )
            context = (probs @ value).transpose(1, 2).reshape(batch, length, -1)  # (B, L, h*d)
            return self.out_proj(context), scores
        context = attend_heads(
            query,
            key,
            value,
            mask,
            self.dropout if self.training else 0.0,
            self.scale,
            dropout_kernel=self.dropout_kernel,
        )
        return self.out_proj(context)  # (B, L, D)

    def forward_unpadded(self, hidden_states: Tensor, layout: UnpadLayout) -> Tensor:
        """Attention of packed real tokens ``(T, D) -> (T, D)``: each token attends the
        real tokens of its own sequence (:meth:`UnpadLayout.attend`)."""
        qkv = self.qkv_proj(hidden_states).view(-1, 3, self.num_heads, self.head_dim)
        context = layout.attend(
            qkv, self.dropout if self.training else 0.0, self.scale, self.dropout_kernel
        )
        return self.out_proj(context)

    def forward_first(
        self,
        hidden_states: Tensor,
        mask: Tensor | None = None,
        layout: UnpadLayout | None = None,
    ) -> Tensor:
        """Attention output at each sequence's first position only: ``(B, 1, D)``.

        Every position still gives its key and value; only the first one asks a query.
        A sequence-level head that reads the first token (BERT's ``[CLS]`` pooler) needs
        nothing else from the last layer (see
        :meth:`~ptm_core.encoders.TransformerEncoder.encode_first`).

        Args:
            hidden_states: ``(B, L, D)``, or the packed real tokens ``(T, D)`` with
                ``layout``.
            mask: the padded path's SDPA mask (:func:`to_sdpa_mask`: ``[B, 1, 1, L]``).
            layout: the unpadded batch's layout; keys and values are projected on the
                ``T`` real tokens and re-padded.
        """
        qkv = self.qkv_proj(hidden_states)  # (B, L, 3 * inner) or (T, 3 * inner)
        if layout is not None:
            qkv = layout.repad(qkv)
        batch, length, _ = qkv.shape
        qkv = qkv.view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, L, d)
        context = attend_heads(
            query[:, :, :1],
            key,
            value,
            mask,
            self.dropout if self.training else 0.0,
            self.scale,
            dropout_kernel=self.dropout_kernel,
        )
        return self.out_proj(context)  # (B, 1, D)

    def forward_cached(
        self,
        hidden_states: Tensor,
        past_key: Tensor,
        past_value: Tensor,
        mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Attend ``T`` new positions over the ``P`` cached ones and themselves.

        The new positions' keys and values are appended to the cached ones (sequence
        dimension), so position ``t`` of the new block is position ``P + t`` overall. Same
        projections and SDPA kernel as :meth:`forward`; without a mask every new position
        sees every cached and new one, which is what causal decoding of one new token
        (``T = 1``) needs. Several new tokens at once need a causal ``mask``.

        Args:
            hidden_states: ``(B, T, D)`` states of the new positions.
            past_key: ``(B, h, P, d)`` cached keys (``P`` may be 0).
            past_value: ``(B, h, P, d)`` cached values.
            mask: ``None`` or bool ``(B or 1, 1, T, P + T)`` (True = may attend), or an
                additive float mask ``(B or 1, h, T, P + T)`` (T5: the position-bias rows
                of the new positions).

        Returns:
            Output ``(B, T, D)``, then the keys and values of all ``P + T`` positions,
            each ``(B, h, P + T, d)``: the cache to pass at the next step.
        """
        batch, length, _ = hidden_states.shape
        if past_key.dim() != 4 or past_key.shape[:2] != (batch, self.num_heads):
            raise ValueError(
                f"past_key has shape {tuple(past_key.shape)} but hidden_states has batch "
                f"{batch} and the layer {self.num_heads} heads; reorder or rebuild the cache "
                "so its first dimension matches the batch"
            )
        qkv = self.qkv_proj(hidden_states).view(batch, length, 3, self.num_heads, self.head_dim)
        query, key, value = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, T, d)
        key = torch.cat([past_key, key], dim=2)  # (B, h, P + T, d)
        value = torch.cat([past_value, value], dim=2)
        context = attend_heads(
            query,
            key,
            value,
            mask,
            self.dropout if self.training else 0.0,
            self.scale,
            dropout_kernel=self.dropout_kernel,
        )
        return self.out_proj(context), key, value  # (B, T, D)
