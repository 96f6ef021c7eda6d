"""A frozen encoder whose layers are mixed into features for a downstream model."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.modules.scalar_mix import ScalarMix


class FrozenEncoderFeatures(nn.Module):
    """ELMo-style features: ``gamma * sum_j softmax(s)_j * h_j`` over a frozen encoder.

    Peters et al. (2018), "Deep contextualized word representations": the pre-trained
    network is fixed and a downstream model learns only how to weight its layers. Here
    the encoder's parameters are frozen (``requires_grad=False``), it always runs in
    eval mode (no dropout, even when the downstream model trains) and without a graph;
    only the :class:`ScalarMix` (``s``, ``gamma``) learns, together with whatever model
    consumes the features.

    Args:
        encoder: a pre-trained encoder (e.g. ``TransformerEncoder.from_pretrained``).
        layers: which representations to mix, indices into ``hidden_states``
            (0 = embedding output, ``i`` = layer ``i``); default all ``num_layers + 1``.
        trainable_mix: learn the mix (False = fixed average, ``gamma = 1``).

    Shapes:
        ``forward(input_ids (B, L), attention_mask (B, L), ...) -> (B, L, D)``; other
        keyword arguments go to the encoder.

    Example:
        >>> features = FrozenEncoderFeatures(TransformerEncoder.from_pretrained(path))
        >>> tagger = nn.Sequential(nn.Linear(features.hidden_size, num_tags))
        >>> logits = tagger(features(input_ids, attention_mask))  # only mix + tagger learn
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        *,
        layers: list[int] | None = None,
        trainable_mix: bool = True,
    ) -> None:
        super().__init__()
        available = encoder.config.num_layers + 1
        self.layers = list(range(available)) if layers is None else list(layers)
        bad = [i for i in self.layers if not -available <= i < available]
        if bad or not self.layers:
            raise ValueError(
                f"layers {bad or self.layers} are out of range: the encoder has {available} "
                f"hidden states (0 = embeddings .. {available - 1} = last layer)"
            )
        self.encoder = encoder
        for parameter in self.encoder.parameters():
            parameter.requires_grad_(False)
        self.encoder.eval()
        self.mix = ScalarMix(len(self.layers), trainable=trainable_mix)

    @property
    def hidden_size(self) -> int:
        return self.encoder.config.hidden_size

    def train(self, mode: bool = True) -> FrozenEncoderFeatures:
        super().train(mode)
        self.encoder.eval()  # frozen: never dropout, whatever the downstream model does
        return self

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, **encoder_kwargs: Any
    ) -> Tensor:
        with torch.no_grad():
            out = self.encoder(
                input_ids,
                attention_mask=attention_mask,
                output_hidden_states=True,
                **encoder_kwargs,
            )
        assert out.hidden_states is not None
        return self.mix([out.hidden_states[i] for i in self.layers])  # (B, L, D)
