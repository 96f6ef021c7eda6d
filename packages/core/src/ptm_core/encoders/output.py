"""What every Transformer encoder stack returns."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class EncoderOutput:
    """What :class:`TransformerEncoder` returns.

    Attributes:
        last_hidden_state: ``(B, L, D)`` output of the last layer (after the final
            LayerNorm in the pre-LN variant).
        hidden_states: when requested, ``num_layers + 1`` tensors ``(B, L, D)``: the
            embedding output (after the ``E -> D`` projection when factorised), then every
            layer's output.
        attention_scores: when requested, ``num_layers`` tensors ``(B, h, L, L)``: each
            layer's pre-softmax attention scores (masked entries hold the most negative
            finite value), from the explicit attention path.
        query_hidden_state: :class:`~ptm_core.encoders.XLNetEncoder` given
            ``query_positions``: ``(B, P, D)`` output of XLNet's query stream at those
            positions.
        memory: :class:`~ptm_core.encoders.XLNetEncoder` with ``memory_length > 0``: ``num_layers`` detached
            tensors ``(B, M', D)``, each layer's input over the last ``M'`` positions
            (previous memory + this segment); pass them as ``memory=`` with the next
            segment.
    """

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...] | None = None
    attention_scores: tuple[Tensor, ...] | None = None
    query_hidden_state: Tensor | None = None
    memory: tuple[Tensor, ...] | None = None
