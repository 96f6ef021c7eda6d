"""The recurrent LMs' one objective: the network's own loss, passed on to the runner.

ELMo's shared softmax and AWD-LSTM's AR/TAR regularisers belong to their networks (the
softmax is saved in ``final/``; AR/TAR read the network's dropped and raw outputs), so the
networks compute their loss themselves and this objective hands it to the
:class:`~ptm_core.objectives.mix.ObjectiveMix` of the generic
:class:`~ptm_core.models.pretraining.PretrainingModel`.
"""

from __future__ import annotations

from typing import Any

from ptm_core.objectives.base import Batch, Objective, ObjectiveOutput
from ptm_core.objectives.mix import ObjectiveMix

#: The objective's name: its metrics are logged as ``lm/<metric>``.
NAME = "lm"


class NetworkLoss(Objective):
    """The network's output (``loss`` and ``metrics``) as the objective's."""

    name = NAME

    def forward(self, encoder_output: Any, batch: Batch) -> ObjectiveOutput:
        return ObjectiveOutput(loss=encoder_output.loss, metrics=dict(encoder_output.metrics))


def network_loss() -> ObjectiveMix:
    """The mix of the one :class:`NetworkLoss` (weight 1)."""
    return ObjectiveMix({NAME: NetworkLoss()})
