"""Per-token binary head: ELECTRA's replaced-token-detection discriminator."""

from __future__ import annotations

from torch import Tensor, nn

from ptm_core.modules.feed_forward import get_activation


class TokenDiscriminatorHead(nn.Module):
    """ELECTRA's discriminator head (Clark et al., 2020): ``w^T act(W h + b) + c`` per token.

    One logit per token; ``sigmoid(logit)`` is the probability that the token was
    replaced by the generator. Returns logits only; the objective computes the loss.

    Args:
        hidden_size: encoder width ``D``.
        activation: activation name (the encoder's, as ELECTRA).

    Shapes:
        ``(..., D) -> (...)``.
    """

    def __init__(self, hidden_size: int, activation: str = "gelu") -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = get_activation(activation)
        self.prediction = nn.Linear(hidden_size, 1)
        for layer in (self.dense, self.prediction):
            nn.init.normal_(layer.weight, std=0.02)
            nn.init.zeros_(layer.bias)

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.prediction(self.activation(self.dense(hidden_states))).squeeze(-1)
