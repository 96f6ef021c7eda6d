"""The Transformer decoder: causal self-attention, cross-attention and feed-forward."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import causal_mask, to_sdpa_mask
from ptm_core.modules.cross_attention import MultiHeadCrossAttention, memory_mask
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import FeedForward


class DecoderLayer(nn.Module):
    """One decoder layer (Vaswani et al., 2017): three residual sub-layers.

    Causal self-attention, cross-attention over the encoder output, then the
    position-wise feed-forward block; the core attention and feed-forward modules, with the
    residual/LayerNorm arrangement of :class:`~ptm_core.encoders.TransformerLayer`:
    ``"post"`` = ``LN(x + Dropout(f(x)))`` (BART), ``"pre"`` = ``x + Dropout(f(LN(x)))``.

    Args:
        hidden_size: width ``D``.
        num_heads: attention heads.
        intermediate_size: feed-forward inner width.
        dropout: dropout on each sub-layer output.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation name.
        layer_norm_eps: LayerNorm epsilon.
        norm_position: ``"post"`` or ``"pre"``.

    Shapes:
        hidden ``(B, T, D)``, memory ``(B, S, D)``; self_mask bool ``(B, 1, T, T)``;
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
    ) -> None:
        super().__init__()
        self.self_attention = MultiHeadSelfAttention(hidden_size, num_heads, attention_dropout)
        self.self_attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.cross_attention = MultiHeadCrossAttention(hidden_size, num_heads, attention_dropout)
        self.cross_attention_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.feed_forward = FeedForward(hidden_size, intermediate_size, activation)
        self.ffn_norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)
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


class TransformerDecoder(nn.Module):
    """Embeddings (token + learned absolute position, LayerNorm) and decoder layers.

    Positions are looked up at ``position_offset + t`` (BART keeps two unused rows in front,
    ``position_offset=2``); the table has ``max_positions + position_offset`` rows.

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
    ) -> None:
        super().__init__()
        self.embeddings = TextEmbeddings(
            vocab_size,
            hidden_size,
            max_positions + position_offset,
            type_vocab_size=0,
            dropout=dropout,
            layer_norm_eps=layer_norm_eps,
            pad_token_id=pad_token_id,
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
            )
            for _ in range(num_layers)
        )
        self.final_norm = (
            nn.LayerNorm(hidden_size, eps=layer_norm_eps) if norm_position == "pre" else None
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
    ) -> Tensor:
        """Decode with teacher forcing.

        Args:
            input_ids: ``(B, T)`` decoder inputs.
            memory: ``(B, S, D)`` encoder output.
            attention_mask: ``(B, T)`` decoder padding (1 = real) or ``None``.
            memory_attention_mask: ``(B, S)`` encoder padding or ``None``.

        Returns:
            ``(B, T, D)`` decoder states.
        """
        length = input_ids.shape[1]
        if length > self.max_positions:
            raise ValueError(
                f"decoder input of {length} tokens is longer than max_positions="
                f"{self.max_positions}; shorten the target or raise max_positions"
            )
        positions = torch.arange(length, device=input_ids.device)[None, :] + self.position_offset
        hidden = self.embeddings(
            inputs_embeds=self.embeddings.word(input_ids) * self.embed_scale,
            position_ids=positions,
        )  # (B, T, D)
        visibility = causal_mask(length, device=input_ids.device)[None]  # (1, T, T)
        if attention_mask is not None:
            visibility = visibility & attention_mask.bool()[:, None, :]
        visibility = visibility.expand(input_ids.shape[0], -1, -1)
        self_mask = to_sdpa_mask(visibility, length)
        cross_mask = memory_mask(memory_attention_mask)
        for layer in self.layers:
            hidden = layer(hidden, memory, self_mask, cross_mask)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return hidden
