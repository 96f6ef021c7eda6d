"""SpanBERT's span-boundary output head."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ptm_core.modules.feed_forward import get_activation


class SpanBoundaryHead(nn.Module):
    """Span Boundary Objective head (Joshi et al., 2020, "SpanBERT", Sec. 3.2).

    For a masked token at relative position ``i`` of the span ``(s, e)``:

    .. math::
        h_0 = [x_{s-1}; x_{e+1}; p_i],\\quad
        h_1 = \\mathrm{LN}(\\mathrm{GELU}(W_1 h_0)),\\quad
        y_i = \\mathrm{LN}(\\mathrm{GELU}(W_2 h_1))

    and the logits are ``W_dec y_i + b_dec`` with ``W_dec`` tied to the token embeddings
    (as the MLM decoder). ``p_i`` is a learned relative-position embedding (``i = 0`` is
    the span's first token). Returns logits only; the objective computes the loss.

    Args:
        hidden_size: encoder width ``D`` (also the width of ``p_i`` and of the MLP).
        vocab_size: number of token ids ``V``.
        max_positions: size of the relative-position table; positions beyond it are
            clipped to the last entry (spans are at most 10 words, rarely 30 pieces).
        activation: MLP activation (``"gelu"`` as the paper).
        layer_norm_eps: LayerNorm epsilon.
        tie_to: embedding table ``(V, D)`` whose weight the decoder shares.

    Shapes:
        ``left, right: (N, D)``, ``positions: (N,)`` long -> ``(N, V)``.
    """

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        *,
        max_positions: int = 32,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        tie_to: nn.Embedding | None = None,
    ) -> None:
        super().__init__()
        if max_positions < 1:
            raise ValueError(f"max_positions must be >= 1, got {max_positions}")
        self.max_positions = max_positions
        self.position_embeddings = nn.Embedding(max_positions, hidden_size)
        self.dense1 = nn.Linear(3 * hidden_size, hidden_size)
        self.norm1 = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dense2 = nn.Linear(hidden_size, hidden_size)
        self.norm2 = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.activation = get_activation(activation)
        self.decoder = nn.Linear(hidden_size, vocab_size)
        for module in (self.dense1, self.dense2, self.decoder):
            nn.init.normal_(module.weight, std=0.02)
            nn.init.zeros_(module.bias)
        nn.init.normal_(self.position_embeddings.weight, std=0.02)
        if tie_to is not None:
            if tuple(tie_to.weight.shape) != (vocab_size, hidden_size):
                raise ValueError(
                    f"cannot tie the SBO decoder ({vocab_size}, {hidden_size}) to an embedding "
                    f"of shape {tuple(tie_to.weight.shape)}; vocab_size and width must match"
                )
            self.decoder.weight = tie_to.weight

    def forward(self, left: Tensor, right: Tensor, positions: Tensor) -> Tensor:
        position = self.position_embeddings(positions.clamp(0, self.max_positions - 1))
        h = torch.cat([left, right, position], dim=-1)  # (N, 3D)
        h = self.norm1(self.activation(self.dense1(h)))
        h = self.norm2(self.activation(self.dense2(h)))
        return self.decoder(h)  # (N, V)
