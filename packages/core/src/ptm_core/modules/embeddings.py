"""Input embeddings: token + absolute position + segment (token type)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ptm_core.modules.dropout import Dropout


class TextEmbeddings(nn.Module):
    """BERT input embeddings (Devlin et al., 2019): ``LN(E_tok + E_pos + E_seg)``, dropout.

    Extension packages add further terms (XLM language embeddings, VisualBERT visual
    embeddings) by passing ``inputs_embeds`` or extra embeddings to the encoder instead of
    subclassing this module.

    Args:
        vocab_size: number of token ids ``V``.
        hidden_size: width ``D``.
        max_positions: number of learned absolute positions.
        type_vocab_size: number of segment ids (0 disables segment embeddings).
        dropout: dropout after the sum (and the norm).
        layer_norm_eps: epsilon of the LayerNorm.
        layer_norm: apply a LayerNorm to the sum (BERT: yes).
        pad_token_id: row of the token table used for padding.
        absolute_positions: add a learned position table (``False`` for encoders with
            relative positions, Transformer-XL / XLNet, whose attention layers see
            distances instead).

    Shapes:
        input_ids / position_ids / token_type_ids ``(B, L)``; inputs_embeds ``(B, L, D)``;
        output ``(B, L, D)``.
    """

    def __init__(
        self,
        vocab_size: int,
        hidden_size: int,
        max_positions: int,
        type_vocab_size: int = 2,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        layer_norm: bool = True,
        pad_token_id: int = 0,
        absolute_positions: bool = True,
    ) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)
        self.position = nn.Embedding(max_positions, hidden_size) if absolute_positions else None
        self.token_type = nn.Embedding(type_vocab_size, hidden_size) if type_vocab_size else None
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps) if layer_norm else None
        self.dropout = Dropout(dropout)
        self.max_positions = max_positions

    def forward(
        self,
        input_ids: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        extra_embeds: Tensor | None = None,
    ) -> Tensor:
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("pass input_ids or inputs_embeds")
            inputs_embeds = self.word(input_ids)
        length = inputs_embeds.shape[1]
        embeddings = inputs_embeds
        if self.position is not None:
            if position_ids is None:
                if length > self.max_positions:
                    raise ValueError(
                        f"sequence of {length} tokens is longer than max_positions="
                        f"{self.max_positions}; truncate the input or use a model with more "
                        "positions"
                    )
                position_ids = torch.arange(length, device=inputs_embeds.device)[None, :]
            embeddings = embeddings + self.position(position_ids)
        elif position_ids is not None:
            raise ValueError(
                "this encoder has relative positions (no position table); do not pass position_ids"
            )
        if self.token_type is not None:
            if token_type_ids is None:
                embeddings = embeddings + self.token_type.weight[0]
            else:
                embeddings = embeddings + self.token_type(token_type_ids)
        if extra_embeds is not None:
            embeddings = embeddings + extra_embeds
        if self.norm is not None:
            embeddings = self.norm(embeddings)
        return self.dropout(embeddings)
