"""CoVe's attentional decoder (McCann et al., 2017, Section 3; Luong et al., 2015's global
attention with input feeding, as the OpenNMT-py fork in salesforce/cove trains it).

At step ``t``, with encoder states ``H`` ``(B, S, 2H)`` and the previous attentional output
``h~_{t-1}``::

    h_t  = LSTM([emb(z_{t-1}); h~_{t-1}], state)       (a stack of LSTM cells)
    a_t  = softmax(H (W_1 h_t))                         (over the source words)
    h~_t = tanh(W_2 [H^T a_t; h_t])
    p(z_t | ...) = softmax(W_out h~_t)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn


class GlobalAttention(nn.Module):
    """Luong's "general" global attention with the tanh output layer.

    Args:
        dim: width of the decoder state and of the encoder states.

    Shapes:
        ``forward(query (B, D), context (B, S, D), context_mask (B, S) bool)`` ->
        ``(h~ (B, D), weights (B, S))``; weights sum to 1 over the unmasked positions.
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear_in = nn.Linear(dim, dim, bias=False)
        self.linear_out = nn.Linear(2 * dim, dim, bias=False)

    def forward(
        self, query: Tensor, context: Tensor, context_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        scores = torch.bmm(context, self.linear_in(query).unsqueeze(2)).squeeze(2)  # (B, S)
        scores = scores.masked_fill(~context_mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        attended = torch.bmm(weights.unsqueeze(1), context).squeeze(1)  # (B, D)
        return torch.tanh(self.linear_out(torch.cat([attended, query], -1))), weights


@dataclass
class DecoderOutput:
    """What :class:`AttentionalDecoder` returns.

    Attributes:
        logits: ``(B, T, V)`` scores over the target vocabulary (softmax gives ``p``).
        attention: ``(B, T, S)`` attention weights of every step.
    """

    logits: Tensor
    attention: Tensor


class AttentionalDecoder(nn.Module):
    """An LSTM decoder with global attention over the MT-LSTM's states and input feeding.

    Args:
        vocab_size: target words ``V``.
        embedding_dim: target word embedding width.
        hidden_size: decoder state width; equals the encoder states' ``2H`` (the decoder
            starts from the encoder's final states, directions concatenated).
        num_layers: stacked LSTM cells (the encoder's two layers give their final states).
        dropout: on the embeddings, between cells and on ``h~``.
        padding_id: the target padding id (its embedding row stays 0).

    Shapes:
        ``forward(target_ids (B, T), context (B, S, D), context_mask (B, S), h0, c0
        (num_layers, B, D)) -> DecoderOutput``.
    """

    def __init__(
        self,
        vocab_size: int,
        embedding_dim: int,
        hidden_size: int,
        *,
        num_layers: int = 2,
        dropout: float = 0.0,
        padding_id: int = 0,
    ) -> None:
        super().__init__()
        self.hidden_size, self.num_layers = hidden_size, num_layers
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=padding_id)
        sizes = [embedding_dim + hidden_size] + [hidden_size] * (num_layers - 1)
        self.cells = nn.ModuleList(nn.LSTMCell(size, hidden_size) for size in sizes)
        self.attention = GlobalAttention(hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.output = nn.Linear(hidden_size, vocab_size)

    def forward(
        self,
        target_ids: Tensor,
        context: Tensor,
        context_mask: Tensor,
        h0: Tensor,
        c0: Tensor,
    ) -> DecoderOutput:
        if h0.shape[0] != self.num_layers or h0.shape[-1] != self.hidden_size:
            raise ValueError(
                f"decoder start state {tuple(h0.shape)}, expected ({self.num_layers}, B, "
                f"{self.hidden_size}): the encoder's layers and 2H must match the decoder's"
            )
        embedded = self.dropout(self.embedding(target_ids))  # (B, T, E)
        h, c = list(h0.unbind(0)), list(c0.unbind(0))
        feed = context.new_zeros(target_ids.shape[0], self.hidden_size)
        outputs, weights = [], []
        for step in range(target_ids.shape[1]):
            x = torch.cat([embedded[:, step], feed], -1)
            for i, cell in enumerate(self.cells):
                h[i], c[i] = cell(x if i == 0 else self.dropout(x), (h[i], c[i]))
                x = h[i]
            feed, attention = self.attention(x, context, context_mask)
            feed = self.dropout(feed)
            outputs.append(feed)
            weights.append(attention)
        hidden = torch.stack(outputs, 1)  # (B, T, D)
        return DecoderOutput(self.output(hidden), torch.stack(weights, 1))


__all__ = ["AttentionalDecoder", "DecoderOutput", "GlobalAttention"]
