"""Evaluation of pre-trained models on held-out text."""

from ptm_core.evaluation.masked_lm import (
    MaskedLMEvaluation,
    evaluate_masked_lm,
    load_masked_lm,
)
from ptm_core.evaluation.metrics import average_metrics
from ptm_core.evaluation.permutation_lm import evaluate_permutation_lm, load_permutation_lm

__all__ = [
    "MaskedLMEvaluation",
    "average_metrics",
    "evaluate_masked_lm",
    "evaluate_permutation_lm",
    "load_masked_lm",
    "load_permutation_lm",
]
