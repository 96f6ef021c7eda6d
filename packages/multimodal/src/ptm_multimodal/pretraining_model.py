"""A multimodal model plus its objectives: the module the trainer optimises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.objectives import IGNORE_INDEX, ObjectiveMix
from ptm_core.objectives.base import Batch

# Batch keys the models read; everything else belongs to objectives.
MODEL_INPUTS = ("attention_mask", "token_type_ids", "visual_boxes", "visual_mask")


@dataclass
class MultimodalOutput:
    """``loss`` (0-d) and ``"<objective>/<metric>"`` scalars, as the trainer expects."""

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class MultimodalPretraining(nn.Module):
    """One pass of a VisualBERT or ViLBERT shared by a mix of objectives.

    Masked-LM labels of swapped-caption rows are ignored (their text is not grounded in
    the image, as ViLBERT does), and for a single-stream model whose output also covers
    the regions (VisualBERT) the labels are padded with ``IGNORE_INDEX`` over the region
    slots, so the core :class:`~ptm_core.objectives.MaskedLMObjective` runs unchanged.

    Args:
        model: a :class:`~ptm_multimodal.visualbert.VisualBertModel` or
            :class:`~ptm_multimodal.vilbert.VilbertModel`.
        objectives: the objectives (built from the model by ``build_objective``).
        match_objective: name of the objective whose logits score image-text pairs.
    """

    def __init__(
        self, model: nn.Module, objectives: ObjectiveMix, *, match_objective: str | None = None
    ) -> None:
        super().__init__()
        self.model = model
        self.objectives = objectives
        names = [n for n in ("itm", "align") if n in objectives.objectives]
        self.match_objective = match_objective or (names[0] if names else None)

    def encode(self, batch: Batch):
        inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
        return self.model(batch["input_ids"], batch["visual_features"], **inputs)

    def forward(self, batch: Batch) -> MultimodalOutput:
        encoded = self.encode(batch)
        if "mlm_labels" in batch:
            labels = batch["mlm_labels"]
            if "match_label" in batch:
                labels = labels.masked_fill(batch["match_label"][:, None] == 0, IGNORE_INDEX)
            extra = encoded.last_hidden_state.shape[1] - labels.shape[1]
            if extra > 0:
                labels = nn.functional.pad(labels, (0, extra), value=IGNORE_INDEX)
            batch = {**batch, "mlm_labels": labels}
        mix = self.objectives(encoded, batch)
        return MultimodalOutput(loss=mix.loss, metrics=mix.metrics)

    @torch.no_grad()
    def match_scores(self, batch: Batch) -> Tensor:
        """``(B,)`` log-odds that each caption describes its image."""
        if self.match_objective is None:
            raise ValueError("no matching objective (itm or align) in this model's mix")
        objective: Any = self.objectives.objectives[self.match_objective]
        logits = objective.logits(self.encode(batch))
        return (logits[:, 1] - logits[:, 0]).float()

    def checkpoint_config(self) -> dict[str, Any]:
        return {
            **self.model.checkpoint_config(),  # type: ignore[operator]
            "objectives": {
                name: {"class": type(obj).__name__, "weight": self.objectives.weights[name]}
                for name, obj in self.objectives
            },
        }
