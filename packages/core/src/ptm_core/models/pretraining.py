"""An encoder and a mix of objectives: the module the trainer optimises."""

from __future__ import annotations

from collections.abc import Sequence
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
    "extra_embeds",  # added to the embedding sum (GLM's block positions, via rewrite_inputs)
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
    """One encoder pass shared by every objective of a :class:`ObjectiveMix`: the model the
    trainer optimises for every family.

    The family's spec names the batch keys its network reads (``input_keys``: ERNIE-THU's
    ``entity_ids``, XLM's ``langs``, VisualBERT's visual features); everything else in a
    batch belongs to the objectives. Objectives ask for more than the last layer with class attributes
    ``needs_hidden_states`` / ``needs_attention_scores`` (distillation); objectives that
    implement :class:`RewritesInputs` (ELECTRA's generator) run before the encoder.

    Args:
        encoder: the network being pre-trained (any :class:`TextBackbone`: a
            ``TransformerEncoder``, a knowledgeable or cross-lingual or visual one).
        objectives: the objectives and their weights.
        input_keys: the batch keys the network's forward reads (default: a text
            encoder's, :data:`ENCODER_INPUTS`).

    Example:
        >>> model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm, "nsp": nsp}))
        >>> model(batch).loss.backward()
    """

    def __init__(
        self,
        encoder: nn.Module,
        objectives: ObjectiveMix,
        input_keys: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.objectives = objectives
        self.input_keys = tuple(input_keys) if input_keys is not None else ENCODER_INPUTS
        self._register_load_state_dict_pre_hook(_adopt_network_checkpoint)

    def forward(self, batch: Batch) -> PretrainingOutput:
        for _, objective in self.objectives:
            if isinstance(objective, RewritesInputs):
                batch = objective.rewrite_inputs(batch)
        inputs: dict[str, Any] = {k: batch[k] for k in self.input_keys if k in batch}
        for _, objective in self.objectives:
            if isinstance(objective, ProvidesMemory):
                memory = objective.memory(self.encoder, batch)  # type: ignore[arg-type]
                if memory is not None:
                    inputs["memory"] = memory
        # Only a text encoder takes these switches; other networks never get asked for them.
        for flag, keyword in (
            ("needs_hidden_states", "output_hidden_states"),
            ("needs_attention_scores", "output_attention_scores"),
        ):
            if self._needs(flag):
                inputs[keyword] = True
        encoded = self.encoder(**inputs)
        mix = self.objectives(encoded, batch)
        return PretrainingOutput(loss=mix.loss, metrics=mix.metrics)

    def _needs(self, flag: str) -> bool:
        return any(getattr(objective, flag, False) for _, objective in self.objectives)

    def checkpoint_config(self) -> dict[str, Any]:
        """What a checkpoint's config.json records about this model: the text stack's
        config, what the network adds (its own ``checkpoint_config``, e.g. ERNIE-THU's
        knowledge layers) and the objectives."""
        text_config: Any = getattr(self.encoder, "text_config", None) or self.encoder.config
        own: Any = getattr(self.encoder, "checkpoint_config", None)
        return {
            "encoder": text_config.to_dict(),
            **(own() if callable(own) else {}),
            "objectives": {
                name: {"class": type(obj).__name__, "weight": self.objectives.weights[name]}
                for name, obj in self.objectives
            },
        }


def _adopt_network_checkpoint(state_dict: dict[str, Any], prefix: str, *_: Any) -> None:
    """Training checkpoints of the families' own wrappers from before this one model resume
    into it: seq2seq's named the network ``model`` (``model.*`` keys), ELMo's and AWD-LSTM's
    held exactly the network's keys at their root; both become ``encoder.*``."""
    own = (f"{prefix}encoder.", f"{prefix}objectives.")
    keys = [key for key in state_dict if key.startswith(prefix)]
    if not keys or any(key.startswith(own) for key in keys):
        return
    old = f"{prefix}model."
    if any(key.startswith(old) for key in keys):
        keys, strip = [key for key in keys if key.startswith(old)], len(old)
    else:
        strip = len(prefix)
    for key in keys:
        state_dict[f"{prefix}encoder.{key[strip:]}"] = state_dict.pop(key)
