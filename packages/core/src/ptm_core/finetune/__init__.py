"""Fine-tuning: task heads on any encoder, the task data formats, one recipe on the Trainer.

- :mod:`ptm_core.finetune.model`: :class:`TaskModel` (an encoder + a head of
  :mod:`ptm_core.heads.tasks`) for ``classification``, ``regression``, ``tagging``, ``qa``
  and ``multiple_choice``; :func:`save_task_model` / :func:`load_task_model`.
- :mod:`ptm_core.finetune.data`: GLUE TSV/JSONL, CoNLL-2003, SQuAD v1.1/v2.0 and SWAG
  readers, featurizers, QA windows and post-processing, :class:`TaskBatches`.
- :mod:`ptm_core.finetune.metrics`: scikit-learn / SciPy / seqeval / official SQuAD scores.
- :mod:`ptm_core.finetune.feature_based`: TagLM/ELMo's frozen encoder + BiLSTM-CRF tagger.
- :mod:`ptm_core.finetune.recipe`: :func:`finetune`, :func:`evaluate_task`,
  :func:`load_finetuned`, :func:`predict` (what ``ptm finetune`` runs).
- :mod:`ptm_core.finetune.predict`, :mod:`ptm_core.finetune.predict_output`:
  :class:`TaskPredictor` and :func:`predict_file` (what ``ptm predict`` runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports

_EXPORTS = {
    "TaskModel": "ptm_core.finetune.model",
    "TaskOutput": "ptm_core.finetune.model",
    "build_task_model": "ptm_core.finetune.model",
    "save_task_model": "ptm_core.finetune.model",
    "load_task_model": "ptm_core.finetune.model",
    "FeatureBasedTagger": "ptm_core.finetune.feature_based",
    "save_feature_based_tagger": "ptm_core.finetune.feature_based",
    "load_feature_based_tagger": "ptm_core.finetune.feature_based",
    "TaskSpec": "ptm_core.finetune.task_spec",
    "FinetuneResult": "ptm_core.finetune.scoring",
    "finetune": "ptm_core.finetune.recipe",
    "evaluate_task": "ptm_core.finetune.scoring",
    "load_finetuned": "ptm_core.finetune.recipe",
    "predict": "ptm_core.finetune.recipe",
    "TaskPredictor": "ptm_core.finetune.predict",
    "predict_file": "ptm_core.finetune.predict_output",
    "read_task": "ptm_core.finetune.task_data",
    "compute_metrics": "ptm_core.finetune.metrics",
}

if TYPE_CHECKING:
    from ptm_core.finetune.feature_based import (
        FeatureBasedTagger,
        load_feature_based_tagger,
        save_feature_based_tagger,
    )
    from ptm_core.finetune.metrics import compute_metrics
    from ptm_core.finetune.model import (
        TaskModel,
        TaskOutput,
        build_task_model,
        load_task_model,
        save_task_model,
    )
    from ptm_core.finetune.predict import TaskPredictor
    from ptm_core.finetune.predict_output import predict_file
    from ptm_core.finetune.recipe import finetune, load_finetuned, predict
    from ptm_core.finetune.scoring import FinetuneResult, evaluate_task
    from ptm_core.finetune.task_data import read_task
    from ptm_core.finetune.task_spec import TaskSpec

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = [
    "FeatureBasedTagger",
    "FinetuneResult",
    "TaskModel",
    "TaskOutput",
    "TaskPredictor",
    "TaskSpec",
    "build_task_model",
    "compute_metrics",
    "evaluate_task",
    "finetune",
    "load_feature_based_tagger",
    "load_finetuned",
    "load_task_model",
    "predict",
    "predict_file",
    "read_task",
    "save_feature_based_tagger",
    "save_task_model",
]
