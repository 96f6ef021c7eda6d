"""Several objectives trained together, as one weighted sum that logs each part."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

import torch
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives.base import Batch, Example, Objective


@dataclass
class MixOutput:
    """Result of :class:`ObjectiveMix`.

    Attributes:
        loss: ``sum_k weight_k * loss_k`` (0-d).
        parts: each objective's unweighted loss, by name.
        metrics: ``"<name>/<metric>"`` scalars, including ``"<name>/loss"``.
    """

    loss: Tensor
    parts: dict[str, Tensor]
    metrics: dict[str, Tensor] = field(default_factory=dict)


class ObjectiveMix(nn.Module):
    """A weighted combination of objectives sharing one encoder pass.

    The data sides run in insertion order (each sees the previous one's output); the
    loss is ``sum_k w_k L_k``.

    Args:
        objectives: name -> objective (names become metric prefixes).
        weights: name -> weight (default 1.0 each); unknown names are an error.
    """

    def __init__(
        self, objectives: Mapping[str, Objective], weights: Mapping[str, float] | None = None
    ) -> None:
        super().__init__()
        if not objectives:
            raise ValueError("an ObjectiveMix needs at least one objective")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(objectives))
        if unknown:
            raise ValueError(
                f"weights given for unknown objective(s) {unknown}; objectives: "
                f"{sorted(objectives)}"
            )
        self.objectives = nn.ModuleDict(dict(objectives))
        self.weights = {name: float(weights.get(name, 1.0)) for name in objectives}
        for name, weight in self.weights.items():
            if not 0.0 <= weight < math.inf:
                raise ValueError(
                    f"weight of objective {name!r} is {weight}; it must be a finite number "
                    ">= 0 (0 leaves that loss out)"
                )
        if not any(self.weights.values()):
            raise ValueError(
                f"all objective weights are 0 ({', '.join(self.weights)}); give at least one "
                "loss a weight above 0"
            )

    def __iter__(self) -> Iterator[tuple[str, Objective]]:
        for name, objective in self.objectives.items():
            yield name, cast(Objective, objective)

    def prepare_example(self, example: Example, generator: torch.Generator) -> Example:
        for _, objective in self:
            example = objective.prepare_example(example, generator)
        return example

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        for _, objective in self:
            batch = objective.collate(batch, generator)
        return batch

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> MixOutput:
        total: Tensor | None = None
        parts: dict[str, Tensor] = {}
        metrics: dict[str, Tensor] = {}
        for name, objective in self:
            out = objective(encoder_output, batch)
            parts[name] = out.loss
            metrics[f"{name}/loss"] = out.loss.detach()
            for key, value in out.metrics.items():
                metrics[f"{name}/{key}"] = value
            weighted = self.weights[name] * out.loss
            total = weighted if total is None else total + weighted
        assert total is not None
        return MixOutput(loss=total, parts=parts, metrics=metrics)
