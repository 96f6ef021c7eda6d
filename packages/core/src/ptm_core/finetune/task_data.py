"""A fine-tuning task's data: its examples, the rows that are batched, their featurizer.

:func:`read_task` reads a task's split (or any file of its format) and builds the
featurizer that turns rows into batches; the recipes (:mod:`ptm_core.finetune.recipe`,
the seq2seq and ULMFiT runs, the extensions') all read their data through it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ptm_core.finetune.data.conll import read_conll
from ptm_core.finetune.data.features import (
    ChoiceFeaturizer,
    SentenceFeaturizer,
    TaggingFeaturizer,
)
from ptm_core.finetune.data.glue import read_glue
from ptm_core.finetune.data.qa import QAFeaturizer
from ptm_core.finetune.data.squad import read_squad
from ptm_core.finetune.data.swag import read_swag
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.task_spec import TaskSpec


@dataclass
class TaskData:
    """A task's examples, and how they become batches.

    Attributes:
        examples: the file's examples (a lazy sequence).
        rows: what is batched: the examples, or QA windows.
        featurizer: rows -> batch.
        label_names: class or tag names (empty for regression, QA, multiple choice).
        labelled: whether the examples carry gold labels (False: prediction only).
    """

    examples: Sequence[Any]
    rows: Sequence[Any]
    featurizer: Any
    label_names: list[str]
    labelled: bool = True


def read_task(
    task: TaskSpec,
    split: str,
    tokenizer: TaskTokenizer,
    label_names: Sequence[str] | None = None,
    *,
    path: str | Path | None = None,
    labelled: bool = True,
) -> TaskData:
    """Read ``task.<split>`` (``train`` or ``dev``), or ``path``, and build its featurizer.

    Args:
        task: the task.
        split: ``"train"`` or ``"dev"``.
        tokenizer: the model's tokenizer.
        label_names: the train set's labels (dev is read against them: an unseen label
            is an error naming the file and line).
        path: another file of the task's format (prediction), instead of the split's.
        labelled: False for a file to predict on (GLUE/SWAG without a ``label`` column,
            CoNLL without a tag column).
    """
    path = path if path is not None else getattr(task, split)
    names = list(label_names) if label_names is not None else None
    featurizer: Any
    if task.format == "glue":
        kind: Literal["classification", "regression"] = (
            "regression" if task.kind == "regression" else "classification"
        )
        examples: Sequence[Any] = read_glue(
            path,
            kind=kind,
            text_fields=task.text_fields,
            label_field=task.label_field,
            label_names=names,
            require_labels=labelled,
        )
        featurizer = SentenceFeaturizer(tokenizer, task.max_length, kind=kind)
        return TaskData(examples, examples, featurizer, list(examples.label_names))  # type: ignore[attr-defined]
    if task.format == "conll":
        records = read_conll(path, label_names=names, tag_column=-1 if labelled else None)
        featurizer = TaggingFeaturizer(tokenizer, task.max_length)
        if not labelled:  # tag 0 everywhere marks each word's first piece; never scored
            rows = [dataclasses.replace(e, tags=[0] * len(e.words)) for e in records]
            return TaskData(rows, rows, featurizer, list(names or []), labelled=False)
        return TaskData(records, records, featurizer, list(records.label_names))
    if task.format == "swag":
        examples = read_swag(path, require_labels=labelled)
        featurizer = ChoiceFeaturizer(tokenizer, task.max_length)
        return TaskData(examples, examples, featurizer, [], labelled=labelled)
    examples = read_squad(path)
    qa = QAFeaturizer(
        tokenizer,
        task.max_length,
        task.doc_stride,
        max_query_length=min(64, task.max_length - task.doc_stride - 4),
    )
    return TaskData(examples, qa.windows(examples), qa, [])


def task_num_labels(task: TaskSpec, train: TaskData) -> int:
    if task.kind == "regression":
        return 1
    if task.kind in ("qa", "multiple_choice"):
        return 2 if task.kind == "qa" else len(train.examples[0].endings)
    if len(train.label_names) < (2 if task.kind == "classification" else 1):
        raise ValueError(
            f"{task.train}: {task.kind} needs at least two labels, the file has "
            f"{train.label_names}; check task.label_field"
        )
    return len(train.label_names)
