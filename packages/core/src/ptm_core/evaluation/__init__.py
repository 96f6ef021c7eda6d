"""Evaluation of pre-trained models on held-out text.

Names load on first use (the registry, :mod:`ptm_core.evaluation.registry`, is read by
``ptm evaluate`` before torch is imported).
"""

from ptm_core._lazy import lazy_exports

_EXPORTS = {
    "MaskedLMEvaluation": "ptm_core.evaluation.masked_lm",
    "evaluate_masked_lm": "ptm_core.evaluation.masked_lm",
    "load_masked_lm": "ptm_core.evaluation.masked_lm",
    "average_metrics": "ptm_core.evaluation.metrics",
    "evaluate_permutation_lm": "ptm_core.evaluation.permutation_lm",
    "load_permutation_lm": "ptm_core.evaluation.permutation_lm",
    "evaluate_seq2seq": "ptm_core.evaluation.seq2seq",
    "load_seq2seq": "ptm_core.evaluation.seq2seq",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

__all__ = sorted(_EXPORTS)
