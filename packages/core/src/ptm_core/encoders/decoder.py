"""The Transformer decoder (causal self-attention, cross-attention, feed-forward) and its
key/value cache for incremental decoding."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import cast

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import causal_mask, to_sdpa_mask
from ptm_core.modules.cross_attention import MultiHeadCrossAttention, memory_mask
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import FeedForward, GatedFeedForward
from ptm_core.modules.norms import make_norm
from ptm_core.modules.positions import RelativePositionBias, bias_mask

DECODER_POSITIONS = ("learned", "t5_buckets")


@dataclass(frozen=True)
class LayerCache:
    """One decoder layer's keys and values kept between generation steps.

    Attributes:
        self_key: ``(N, h, P, d)`` self-attention keys of the ``P`` positions decoded so far.
        self_value: ``(N, h, P, d)`` their values.
        cross_key: ``(N, h, S, d)`` cross-attention keys of the encoder output, or
            ``(1, h, S, d)`` shared by every row (the beams of one source).
        cross_value: same shape as ``cross_key``.
    """

    self_key: Tensor
    self_value: Tensor
    cross_key: Tensor
    cross_value: Tensor


@dataclass(frozen=True)
class DecoderCache:
    """Key/value cache of :class:`TransformerDecoder` for incremental decoding.

    Built by :meth:`TransformerDecoder.init_cache` (cross-attention keys/values computed
    once from the encoder output, empty self-attention ones) and advanced by
    :meth:`TransformerDecoder.step`, which returns a new cache with the new positions'
    self-attention keys/values appended. Rows are decoding hypotheses (``N`` = batch, or
    batch x beams); :meth:`reorder` follows beam search when it re-selects them. The cache
    is a plain value: nothing is stored on the modules.

    Attributes:
        layers: one :class:`LayerCache` per decoder layer.
        cross_mask: ``None`` or bool ``(N or 1, 1, 1, S)`` encoder padding (True = real),
            the same batch as the layers' ``cross_key``.
        length: ``P``, decoder positions already cached; the next token is at position
            ``P`` (learned position row ``position_offset + P``, or position-bias row
            ``P`` with T5 buckets).
    """

    layers: tuple[LayerCache, ...]
    cross_mask: Tensor | None
    length: int

    @property
    def num_rows(self) -> int:
        """``N``, the number of hypotheses the self-attention cache holds."""
        return self.layers[0].self_key.shape[0] if self.layers else 0

    def reorder(self, index: Tensor) -> DecoderCache:
        """Select rows: row ``i`` of the result is row ``index[i]`` of this cache.

        Beam search calls it after each step with the parent of every surviving beam, so a
        row may be repeated (two beams sharing a parent) or dropped. Cross-attention
        keys/values of batch 1 are shared by every row and kept as they are.

        Args:
            index: ``(N',)`` long row indices into ``N``.

        Returns:
            A cache with ``N'`` rows.
        """
        if index.dim() != 1:
            raise ValueError(f"reorder takes a 1-D row index, got shape {tuple(index.shape)}")

        layers = tuple(
            LayerCache(
                layer.self_key.index_select(0, index),
                layer.self_value.index_select(0, index),
                *_select_shared(index, layer.cross_key, layer.cross_value),
            )
            for layer in self.layers
        )
        cross_mask = self.cross_mask
        if cross_mask is not None and cross_mask.shape[0] != 1:
            cross_mask = cross_mask.index_select(0, index)
        return replace(self, layers=layers, cross_mask=cross_mask)


def _select_shared(index: Tensor, *tensors: Tensor) -> tuple[Tensor, ...]:
    # Batch-1 tensors are shared by every row (one source, many beams): nothing to select.
    return tuple(t if t.shape[0] == 1 else t.index_select(0, index) for t in tensors)


class DecoderLayer(nn.Module):
    """One decoder layer (Vaswani et al., 2017): three residual sub-layers.

    Causal self-attention, cross-attention over the encoder output, then the
    position-wise feed-forward block; the core attention and feed-forward modules, with the
    residual/LayerNorm arrangement of :class:`~ptm_core.encoders.TransformerLayer`:
    ``"post"`` = ``LN(x + Dropout(f(x)))`` (BART), ``"pre"`` = ``x + Dropout(f(LN(x)))``.
    T5 (Raffel et al., 2020) is ``"pre"`` with RMS norms, no biases, no ``1/sqrt(d)``
    attention scaling and a ReLU (v1.0) or gated-GELU (v1.1) feed-forward.

    Args:
        hidden_size: width ``D``.
        num_heads: attention heads.
        intermediate_size: feed-forward inner width.
        dropout: dropout on each sub-layer output.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation name.
        layer_norm_eps: LayerNorm epsilon.
        norm_position: ``"post"`` or ``"pre"``.
        norm_type: ``"layernorm"`` or ``"rmsnorm"`` (T5).
        bias: biases on the attention and feed-forward linears (T5: no).
        attention_scale: divide ``QK^T`` by ``sqrt(d)`` (T5: no).
        gated_feed_forward: gated feed-forward (T5 v1.1).

    Shapes:
        hidden ``(B, T, D)``, memory ``(B, S, D)``; self_mask bool ``(B, 1, T, T)`` or an
        additive float ``(B or 1, h, T, T)`` (T5's position bias folded in);
        cross_mask ``None`` or bool ``(B, 1, 1, S)``; output ``(B, T, D)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        intermediate_size: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        norm_position: str = "post",
        *,
        norm_type: str = "layernorm",
        bias: bool = True,
        attention_scale: bool = True,
        gated_feed_forward: bool = False,
    ) -> None:
        super().__init__()
        self.self_attention = MultiHeadSelfAttention(
            hidden_size, num_heads, attention_dropout, bias=bias, scale=attention_scale
        )
        self.self_attention_norm = make_norm(norm_type, hidden_size, layer_norm_eps)
        self.cross_attention = MultiHeadCrossAttention(
            hidden_size, num_heads, attention_dropout, bias=bias, scale=attention_scale
        )
        self.cross_attention_norm = make_norm(norm_type, hidden_size, layer_norm_eps)
        self.feed_forward: nn.Module = (
            GatedFeedForward(hidden_size, intermediate_size, activation, bias)
            if gated_feed_forward
            else FeedForward(hidden_size, intermediate_size, activation, bias)
        )
        self.ffn_norm = make_norm(norm_type, hidden_size, layer_norm_eps)
        self.dropout = Dropout(dropout)
        self.pre_norm = norm_position == "pre"

    def forward(
        self,
        hidden: Tensor,
        memory: Tensor,
        self_mask: Tensor | None,
        cross_mask: Tensor | None,
    ) -> Tensor:
        x = hidden
        if self.pre_norm:
            x = x + self.dropout(self.self_attention(self.self_attention_norm(x), self_mask))
            x = x + self.dropout(
                self.cross_attention(self.cross_attention_norm(x), memory, cross_mask)
            )
            return x + self.dropout(self.feed_forward(self.ffn_norm(x)))
        x = self.self_attention_norm(x + self.dropout(self.self_attention(x, self_mask)))
        x = self.cross_attention_norm(x + self.dropout(self.cross_attention(x, memory, cross_mask)))
        return self.ffn_norm(x + self.dropout(self.feed_forward(x)))

    def empty_cache(self, memory: Tensor) -> LayerCache:
        """A cache with no decoded positions; cross keys/values projected from ``memory``.

        Args:
            memory: ``(N, S, D)`` encoder output.

        Returns:
            Self-attention keys/values ``(N, h, 0, d)``, cross ones ``(N, h, S, d)``.
        """
        attention = self.self_attention
        empty = memory.new_zeros(memory.shape[0], attention.num_heads, 0, attention.head_dim)
        key, value = self.cross_attention.project_memory(memory)
        return LayerCache(empty, empty, key, value)

    def forward_cached(
        self,
        hidden: Tensor,
        cache: LayerCache,
        self_mask: Tensor | None,
        cross_mask: Tensor | None,
    ) -> tuple[Tensor, LayerCache]:
        """The layer on ``T`` new positions, attending over the cached ones.

        Args:
            hidden: ``(N, T, D)`` states of the new positions.
            cache: this layer's cache with ``P`` positions.
            self_mask: ``None`` (``T = 1``) or bool ``(1, 1, T, P + T)`` causal visibility,
                or an additive float ``(1, h, T, P + T)`` (T5: position-bias rows of the new
                positions with the causal mask folded in).
            cross_mask: ``None`` or bool ``(N or 1, 1, 1, S)``.

        Returns:
            ``(N, T, D)`` and the cache with ``P + T`` positions.
        """
        x = hidden
        if self.pre_norm:
            attended, key, value = self.self_attention.forward_cached(
                self.self_attention_norm(x), cache.self_key, cache.self_value, self_mask
            )
            x = x + self.dropout(attended)
            x = x + self.dropout(
                self.cross_attention.attend(
                    self.cross_attention_norm(x), cache.cross_key, cache.cross_value, cross_mask
                )
            )
            x = x + self.dropout(self.feed_forward(self.ffn_norm(x)))
        else:
            attended, key, value = self.self_attention.forward_cached(
                x, cache.self_key, cache.self_value, self_mask
            )
            x = self.self_attention_norm(x + self.dropout(attended))
            crossed = self.cross_attention.attend(x, cache.cross_key, cache.cross_value, cross_mask)
            x = self.cross_attention_norm(x + self.dropout(crossed))
            x = self.ffn_norm(x + self.dropout(self.feed_forward(x)))
        return x, replace(cache, self_key=key, self_value=value)


class TransformerDecoder(nn.Module):
    """Embeddings (token + learned absolute position, LayerNorm) and decoder layers.

    Positions are looked up at ``position_offset + t`` (BART keeps two unused rows in front,
    ``position_offset=2``); the table has ``max_positions + position_offset`` rows. With
    ``position_encoding="t5_buckets"`` (T5, Raffel et al., 2020) there is no table: a
    unidirectional bucketed position bias (:class:`~ptm_core.modules.positions.RelativePositionBias`)
    is computed once per call and added to the self-attention logits of every layer; a
    cached step uses its rows for the new positions against every cached key.

    Args:
        vocab_size: token ids.
        hidden_size: width ``D``.
        num_layers: decoder layers.
        num_heads: attention heads.
        intermediate_size: feed-forward inner width.
        max_positions: longest decoder input.
        position_offset: first position row used.
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation.
        layer_norm_eps: LayerNorm epsilon.
        norm_position: ``"post"`` (BART) or ``"pre"`` (with a final LayerNorm).
        pad_token_id: padding row of the token table.
        embed_scale: factor on token vectors (``sqrt(D)`` when BART's ``scale_embedding``).
        position_encoding: ``"learned"`` (absolute table) or ``"t5_buckets"``.
        relative_attention_num_buckets: T5 distance buckets.
        relative_attention_max_distance: T5 distance that reaches the last bucket.
        norm_type: ``"layernorm"`` or ``"rmsnorm"`` (T5), for layers and final norm.
        bias: biases on the attention and feed-forward linears.
        attention_scale: divide ``QK^T`` by ``sqrt(d)``.
        gated_feed_forward: gated feed-forward (T5 v1.1).
        embedding_layer_norm: LayerNorm on the embeddings (BART yes, T5 no).
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        num_layers: int,
        num_heads: int,
        intermediate_size: int,
        max_positions: int,
        position_offset: int = 2,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        norm_position: str = "post",
        pad_token_id: int = 1,
        embed_scale: float = 1.0,
        *,
        position_encoding: str = "learned",
        relative_attention_num_buckets: int = 32,
        relative_attention_max_distance: int = 128,
        norm_type: str = "layernorm",
        bias: bool = True,
        attention_scale: bool = True,
        gated_feed_forward: bool = False,
        embedding_layer_norm: bool = True,
    ) -> None:
        super().__init__()
        if position_encoding not in DECODER_POSITIONS:
            raise ValueError(
                f"unknown decoder position_encoding {position_encoding!r}; valid: "
                f"{', '.join(DECODER_POSITIONS)}"
            )
        self.embeddings = TextEmbeddings(
            vocab_size,
            hidden_size,
            max_positions + position_offset,
            type_vocab_size=0,
            dropout=dropout,
            layer_norm_eps=layer_norm_eps,
            layer_norm=embedding_layer_norm,
            pad_token_id=pad_token_id,
            absolute_positions=position_encoding == "learned",
        )
        self.layers = nn.ModuleList(
            DecoderLayer(
                hidden_size,
                num_heads,
                intermediate_size,
                dropout,
                attention_dropout,
                activation,
                layer_norm_eps,
                norm_position,
                norm_type=norm_type,
                bias=bias,
                attention_scale=attention_scale,
                gated_feed_forward=gated_feed_forward,
            )
            for _ in range(num_layers)
        )
        self.final_norm = (
            make_norm(norm_type, hidden_size, layer_norm_eps) if norm_position == "pre" else None
        )
        self.relative_position_bias = (
            RelativePositionBias(
                num_heads,
                relative_attention_num_buckets,
                relative_attention_max_distance,
                bidirectional=False,
            )
            if position_encoding == "t5_buckets"
            else None
        )
        self.position_offset = position_offset
        self.max_positions = max_positions
        self.embed_scale = embed_scale

    def forward(
        self,
        input_ids: Tensor,
        memory: Tensor,
        attention_mask: Tensor | None = None,
        memory_attention_mask: Tensor | None = None,
        extra_embeds: Tensor | None = None,
    ) -> Tensor:
        """Decode with teacher forcing.

        Args:
            input_ids: ``(B, T)`` decoder inputs.
            memory: ``(B, S, D)`` encoder output.
            attention_mask: ``(B, T)`` decoder padding (1 = real) or ``None``.
            memory_attention_mask: ``(B, S)`` encoder padding or ``None``.
            extra_embeds: ``(B, T, D)`` or ``(B, 1, D)`` vectors added to the token and
                position embeddings before their LayerNorm (XNLG's target-language
                embedding), or ``None``.

        Returns:
            ``(B, T, D)`` decoder states.
        """
        length = input_ids.shape[1]
        hidden = self._embed(input_ids, start=0, extra_embeds=extra_embeds)  # (B, T, D)
        visibility = causal_mask(length, device=input_ids.device)[None]  # (1, T, T)
        if attention_mask is not None:
            visibility = visibility & attention_mask.bool()[:, None, :]
        visibility = visibility.expand(input_ids.shape[0], -1, -1)
        self_mask = to_sdpa_mask(visibility, length)
        if self.relative_position_bias is not None:
            bias = self.relative_position_bias(length, length)  # (1, h, T, T)
            self_mask = bias_mask(bias, self_mask)  # (B, h, T, T)
        cross_mask = memory_mask(memory_attention_mask)
        for layer in self.layers:
            hidden = layer(hidden, memory, self_mask, cross_mask)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden

    def init_cache(
        self, memory: Tensor, memory_attention_mask: Tensor | None = None
    ) -> DecoderCache:
        """An empty cache for decoding against ``memory``, to pass to :meth:`step`.

        The cross-attention keys/values of every layer are projected here, once per
        generation. The self-attention cache starts with no positions and ``memory``'s
        batch; a ``memory`` of batch 1 may serve several rows (beams) after
        :meth:`DecoderCache.reorder`.

        Args:
            memory: ``(N, S, D)`` encoder output.
            memory_attention_mask: ``(N, S)`` encoder padding (1 = real) or ``None``.

        Returns:
            A :class:`DecoderCache` with ``length == 0``.
        """
        layers = tuple(cast(DecoderLayer, layer).empty_cache(memory) for layer in self.layers)
        return DecoderCache(layers, memory_mask(memory_attention_mask), 0)

    def step(
        self, input_ids: Tensor, cache: DecoderCache, extra_embeds: Tensor | None = None
    ) -> tuple[Tensor, DecoderCache]:
        """Decode ``T`` new tokens (usually one) after the ``P`` positions in ``cache``.

        Equal, to float rounding, to the last ``T`` positions of :meth:`forward` on the
        whole prefix (no decoder padding), at the cost of the new positions only. The new
        tokens take learned positions ``P .. P + T - 1`` (rows offset by
        ``position_offset``); with T5 buckets they attend with the position-bias rows of
        queries ``P .. P + T - 1`` against all ``P + T`` keys.

        Args:
            input_ids: ``(N, T)`` new decoder inputs, one row per cache row.
            cache: from :meth:`init_cache` or a previous :meth:`step`.
            extra_embeds: ``(N, T, D)`` or ``(N, 1, D)`` vectors added before the embedding
                LayerNorm, as in :meth:`forward`, or ``None``.

        Returns:
            ``(N, T, D)`` decoder states of the new positions and the cache with
            ``P + T`` positions (``cache`` itself is left unchanged).
        """
        rows, length = input_ids.shape
        if self.layers and rows != cache.num_rows:
            raise ValueError(
                f"input_ids has {rows} rows but the decoder cache {cache.num_rows}; "
                "reorder the cache (DecoderCache.reorder) when beams are re-selected"
            )
        past = cache.length
        hidden = self._embed(input_ids, start=past, extra_embeds=extra_embeds)  # (N, T, D)
        self_mask = None
        if length > 1:
            visible = torch.ones(length, past + length, dtype=torch.bool, device=hidden.device)
            self_mask = visible.tril(diagonal=past)[None, None]  # (1, 1, T, P + T)
        if self.relative_position_bias is not None:
            # Rows of the new positions P .. P + T - 1 against all P + T keys.
            bias = self.relative_position_bias(length, past + length, query_offset=past)
            self_mask = bias_mask(bias, self_mask)  # (1, h, T, P + T)
        layers = []
        for layer, layer_cache in zip(self.layers, cache.layers, strict=True):
            hidden, layer_cache = cast(DecoderLayer, layer).forward_cached(
                hidden, layer_cache, self_mask, cache.cross_mask
            )
            layers.append(layer_cache)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden, replace(cache, layers=tuple(layers), length=past + length)

    def _embed(self, input_ids: Tensor, start: int, extra_embeds: Tensor | None = None) -> Tensor:
        # Tokens at decoder positions start .. start + T - 1: (B, T) -> (B, T, D).
        end = start + input_ids.shape[1]
        if end > self.max_positions:
            raise ValueError(
                f"decoder input of {end} tokens is longer than max_positions="
                f"{self.max_positions}; shorten the target or raise max_positions"
            )
        positions = (
            torch.arange(start, end, device=input_ids.device)[None, :] + self.position_offset
            if self.embeddings.position is not None
            else None
        )
        return self.embeddings(
            inputs_embeds=self.embeddings.word(input_ids) * self.embed_scale,
            position_ids=positions,
            extra_embeds=extra_embeds,
        )
