"""An encoder and a mix of objectives: the module the trainer optimises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from torch import Tensor, nn

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives.base import Batch
from ptm_core.objectives.mix import ObjectiveMix

# Batch keys the encoder reads; everything else belongs to objectives.
ENCODER_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "token_type_ids",
    "query_positions",  # XLNet's query stream (permutation LM)
    "query_attention_mask",
    "memory_mask",  # Transformer-XL recurrence: which memory positions are real
)


@runtime_checkable
class RewritesInputs(Protocol):
    """An objective whose model-side step changes the encoder's input (ELECTRA).

    :meth:`rewrite_inputs` runs inside the model's forward, before the encoder pass, with
    gradients on (the ELECTRA generator is trained here); it returns the batch the encoder
    and every objective then see.
    """

    def rewrite_inputs(self, batch: Batch) -> Batch: ...


@runtime_checkable
class ProvidesMemory(Protocol):
    """An objective that gives the encoder a memory of a previous segment (XLNet).

    :meth:`memory` runs inside the model's forward, before the encoder pass; it returns
    the ``memory=`` argument of a relative encoder (or ``None``).
    """

    def memory(self, encoder: TransformerEncoder, batch: Batch) -> tuple[Tensor, ...] | None: ...


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

    Objectives ask for more than the last layer with class attributes
    ``needs_hidden_states`` / ``needs_attention_scores`` (distillation); objectives that
    implement :class:`RewritesInputs` (ELECTRA's generator) run before the encoder.

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
        for _, objective in self.objectives:
            if isinstance(objective, RewritesInputs):
                batch = objective.rewrite_inputs(batch)
        inputs: dict[str, Any] = {k: batch[k] for k in ENCODER_INPUTS if k in batch}
        for _, objective in self.objectives:
            if isinstance(objective, ProvidesMemory):
                memory = objective.memory(self.encoder, batch)
                if memory is not None:
                    inputs["memory"] = memory
        encoded = self.encoder(
            **inputs,
            output_hidden_states=self._needs("needs_hidden_states"),
            output_attention_scores=self._needs("needs_attention_scores"),
        )
        mix = self.objectives(encoded, batch)
        return PretrainingOutput(loss=mix.loss, metrics=mix.metrics)

    def _needs(self, flag: str) -> bool:
        return any(getattr(objective, flag, False) for _, objective in self.objectives)

    def checkpoint_config(self) -> dict[str, Any]:
        """What a checkpoint's config.json records about this model."""
        return {
            "encoder": self.encoder.config.to_dict(),
            "objectives": {
                name: {"class": type(obj).__name__, "weight": self.objectives.weights[name]}
                for name, obj in self.objectives
            },
        }
