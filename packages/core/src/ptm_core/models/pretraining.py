"""An encoder and a mix of objectives: the module the trainer optimises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives.base import Batch
from ptm_core.objectives.mix import ObjectiveMix

# Batch keys the encoder reads; everything else belongs to objectives.
ENCODER_INPUTS = ("input_ids", "attention_mask", "position_ids", "token_type_ids")


@dataclass
class PretrainingOutput:
    """Attributes:
    loss: weighted total loss (0-d).
    metrics: ``"<objective>/<metric>"`` scalars for logging.
    """

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class PretrainingModel(nn.Module):
    """One encoder pass shared by every objective of a :class:`ObjectiveMix`.

    Args:
        encoder: the network being pre-trained.
        objectives: the objectives and their weights.

    Example:
        >>> model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm, "nsp": nsp}))
        >>> model(batch).loss.backward()
    """

    def __init__(self, encoder: TransformerEncoder, objectives: ObjectiveMix) -> None:
        super().__init__()
        self.encoder = encoder
        self.objectives = objectives

    def forward(self, batch: Batch) -> PretrainingOutput:
        inputs = {k: batch[k] for k in ENCODER_INPUTS if k in batch}
        encoded = self.encoder(**inputs)
        mix = self.objectives(encoded, batch)
        return PretrainingOutput(loss=mix.loss, metrics=mix.metrics)

    def checkpoint_config(self) -> dict[str, Any]:
        """What a checkpoint's config.json records about this model."""
        return {
            "encoder": self.encoder.config.to_dict(),
            "objectives": {
                name: {"class": type(obj).__name__, "weight": self.objectives.weights[name]}
                for name, obj in self.objectives
            },
        }
