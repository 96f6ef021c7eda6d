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
from ptm_core.finetune.data.task_tokenizer import HFTokenizer, TaskTokenizer, load_task_tokenizer

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
