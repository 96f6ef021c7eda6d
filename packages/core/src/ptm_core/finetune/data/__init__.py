"""Downstream task data: readers for the formats users have, featurizers, batches.

- Readers (each error names ``file:line`` or the JSON path, the field and the fix):
  :func:`read_glue` (GLUE-style TSV/JSONL), :func:`read_conll` (CoNLL-2003 columns),
  :func:`read_squad` (SQuAD v1.1/v2.0 JSON), :func:`read_swag` (SWAG-style CSV).
- Featurizers (a list of rows -> one padded batch): :class:`SentenceFeaturizer`,
  :class:`TaggingFeaturizer`, :class:`QAFeaturizer` (windows with a stride),
  :class:`ChoiceFeaturizer`; :class:`TaskBatches` is the trainer's batch source.
- :func:`postprocess_qa` maps start/end logits back to answer text.
- :class:`TaskTokenizer` is what the featurizers take: BERT's ``WordPieceTokenizer`` or
  :class:`HFTokenizer` (any Hugging Face ``tokenizer.json``: BPE, Unigram, WordPiece);
  :func:`load_task_tokenizer` picks one for a model folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports

# Loaded on first use: `ptm prepare` and its shard workers read a tokenizer through
# `task_tokenizer` and must not import torch (the featurizers and batches do).
_EXPORTS = {
    "read_conll": "ptm_core.finetune.data.conll",
    "ChoiceExample": "ptm_core.finetune.data.examples",
    "QAAnswer": "ptm_core.finetune.data.examples",
    "QAExample": "ptm_core.finetune.data.examples",
    "SentenceExample": "ptm_core.finetune.data.examples",
    "TaggedExample": "ptm_core.finetune.data.examples",
    "IGNORE_INDEX": "ptm_core.finetune.data.features",
    "ChoiceFeaturizer": "ptm_core.finetune.data.features",
    "Featurizer": "ptm_core.finetune.data.features",
    "SentenceFeaturizer": "ptm_core.finetune.data.features",
    "TaggingFeaturizer": "ptm_core.finetune.data.features",
    "aligned_tags": "ptm_core.finetune.data.features",
    "read_glue": "ptm_core.finetune.data.glue",
    "QAFeaturizer": "ptm_core.finetune.data.qa",
    "QAWindow": "ptm_core.finetune.data.qa",
    "QAWindows": "ptm_core.finetune.data.qa",
    "postprocess_qa": "ptm_core.finetune.data.qa",
    "squad_references": "ptm_core.finetune.data.qa",
    "ExampleList": "ptm_core.finetune.data.records",
    "TaskRecords": "ptm_core.finetune.data.records",
    "SquadExamples": "ptm_core.finetune.data.squad",
    "read_squad": "ptm_core.finetune.data.squad",
    "read_swag": "ptm_core.finetune.data.swag",
    "TaskBatches": "ptm_core.finetune.data.task_batches",
    "HFTokenizer": "ptm_core.finetune.data.task_tokenizer",
    "TaskTokenizer": "ptm_core.finetune.data.task_tokenizer",
    "load_task_tokenizer": "ptm_core.finetune.data.task_tokenizer",
}

if TYPE_CHECKING:
    from ptm_core.finetune.data.conll import read_conll
    from ptm_core.finetune.data.examples import (
        ChoiceExample,
        QAAnswer,
        QAExample,
        SentenceExample,
        TaggedExample,
    )
    from ptm_core.finetune.data.features import (
        IGNORE_INDEX,
        ChoiceFeaturizer,
        Featurizer,
        SentenceFeaturizer,
        TaggingFeaturizer,
        aligned_tags,
    )
    from ptm_core.finetune.data.glue import read_glue
    from ptm_core.finetune.data.qa import (
        QAFeaturizer,
        QAWindow,
        QAWindows,
        postprocess_qa,
        squad_references,
    )
    from ptm_core.finetune.data.records import ExampleList, TaskRecords
    from ptm_core.finetune.data.squad import SquadExamples, read_squad
    from ptm_core.finetune.data.swag import read_swag
    from ptm_core.finetune.data.task_batches import TaskBatches
    from ptm_core.finetune.data.task_tokenizer import (
        HFTokenizer,
        TaskTokenizer,
        load_task_tokenizer,
    )

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
__all__ = [
    "IGNORE_INDEX",
    "ChoiceExample",
    "ChoiceFeaturizer",
    "ExampleList",
    "Featurizer",
    "HFTokenizer",
    "QAAnswer",
    "QAExample",
    "QAFeaturizer",
    "QAWindow",
    "QAWindows",
    "SentenceExample",
    "SentenceFeaturizer",
    "SquadExamples",
    "TaggedExample",
    "TaggingFeaturizer",
    "TaskBatches",
    "TaskRecords",
    "TaskTokenizer",
    "aligned_tags",
    "load_task_tokenizer",
    "postprocess_qa",
    "read_conll",
    "read_glue",
    "read_squad",
    "read_swag",
    "squad_references",
]
