"""Pre-training objectives: each owns its data side and its loss side."""

from ptm_core.objectives.base import IGNORE_INDEX, Objective, ObjectiveOutput
from ptm_core.objectives.mix import MixOutput, ObjectiveMix
from ptm_core.objectives.mlm import (
    MaskedLMObjective,
    apply_replacements,
    mask_tokens,
    select_positions,
)
from ptm_core.objectives.nsp import NextSentenceObjective

__all__ = [
    "IGNORE_INDEX",
    "MaskedLMObjective",
    "MixOutput",
    "NextSentenceObjective",
    "Objective",
    "ObjectiveMix",
    "ObjectiveOutput",
    "apply_replacements",
    "mask_tokens",
    "select_positions",
]
