"""Masked-language-model output head."""

from __future__ import annotations

from torch import Tensor, nn

from ptm_core.modules.feed_forward import get_activation


class MaskedLMHead(nn.Module):
    """BERT's MLM head (Devlin et al., 2019): ``W_dec · LN(act(W x + b)) + b_dec``.

    The decoder weight is tied to the token embedding table when ``tie_to`` is given (the
    tie is declared here, explicitly, not discovered by name). The head returns logits
    only; the objective computes the loss.

    Args:
        hidden_size: encoder width ``D``.
        vocab_size: number of token ids ``V``.
        activation: transform activation (``"gelu"`` as BERT).
        layer_norm_eps: LayerNorm epsilon.
        tie_to: embedding table whose weight ``(V, D)`` the decoder shares.
        embedding_size: width of the decoder input when it differs from ``D``
            (factorised embeddings); default: the width of ``tie_to``, else ``D``.

    Shapes:
        ``(..., D) -> (..., V)``; call it on the gathered masked positions ``(N, D)`` to
        skip the projection everywhere else.
    """

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        *,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        tie_to: nn.Embedding | None = None,
        embedding_size: int | None = None,
    ) -> None:
        super().__init__()
        # A decoder tied to a factorised table (ALBERT/ELECTRA, ``V x E``) decodes from E.
        width = embedding_size or (tie_to.embedding_dim if tie_to is not None else hidden_size)
        self.dense = nn.Linear(hidden_size, width)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(width, eps=layer_norm_eps)
        self.decoder = nn.Linear(width, vocab_size)
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)
        nn.init.normal_(self.decoder.weight, std=0.02)
        nn.init.zeros_(self.decoder.bias)
        if tie_to is not None:
            if tuple(tie_to.weight.shape) != (vocab_size, width):
                raise ValueError(
                    f"cannot tie the MLM decoder ({vocab_size}, {width}) to an embedding of "
                    f"shape {tuple(tie_to.weight.shape)}; vocab_size and width must match"
                )
            self.decoder.weight = tie_to.weight

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.decoder(self.norm(self.activation(self.dense(hidden_states))))
