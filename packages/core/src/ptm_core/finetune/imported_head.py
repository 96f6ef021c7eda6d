"""Fine-tuning from a folder that already has a task head: keep it when it fits the task.

``init_from=<an ElectraForSequenceClassification folder>`` (or any ``...For<Task>`` folder
:mod:`ptm_core.checkpoints.hf.bert_tasks` reads) continues training the folder's head, in
its own variant (ELECTRA's GELU head, XLNet's last-token summary), as ``transformers``'
``from_pretrained`` would. The head starts fresh, in the same variant, when it cannot
serve the task: another task kind, another number of labels, or label names that differ
from the task's (names that are a permutation of the task's reorder the classifier's rows).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, cast

import torch

from ptm_core.finetune.model import TaskModel, build_task_model, head_settings, pooler_variant

logger = logging.getLogger(__name__)

# transformers' names for labels nobody named (``id2label`` defaults).
_DEFAULT_LABEL = re.compile(r"LABEL_\d+")


def _fresh(
    imported: TaskModel,
    kind: str,
    num_labels: int,
    label_names: Sequence[str] | None,
    dropout: float,
    why: str,
) -> tuple[TaskModel, str]:
    settings = head_settings(imported.head)
    model = build_task_model(
        imported.encoder,
        kind,
        num_labels,
        dropout,
        pool=cast(Any, settings["pool"]),
        label_names=label_names,
        **pooler_variant(settings),
    )
    return model, f"task head initialised fresh ({why})"


def _row_order(imported: TaskModel, label_names: Sequence[str] | None) -> list[int] | None:
    """The folder's label index for each of the task's labels, or ``None`` if they differ."""
    names = imported.label_names
    if not label_names or not names or all(_DEFAULT_LABEL.fullmatch(n) for n in names):
        return list(range(imported.num_labels))  # unnamed labels: positional
    if sorted(names) != sorted(label_names):
        return None
    return [names.index(name) for name in label_names]


def keep_imported_head(
    imported: TaskModel,
    kind: str,
    num_labels: int,
    label_names: Sequence[str] | None,
    dropout: float,
) -> tuple[TaskModel, str]:
    """The task model to fine-tune from ``imported``, and one line saying what it kept.

    Args:
        imported: the model an ``init_from`` folder holds, head included.
        kind: the task's kind.
        num_labels: the task's number of labels.
        label_names: the task's label names in index order (``None`` or empty for
            kinds without names).
        dropout: the run's head dropout (``finetune.dropout``), which replaces the folder's.

    Returns:
        ``(model, note)``: the model on ``imported``'s encoder, with its head (rows
        reordered to the task's labels) or a fresh head of the same variant, and the note
        (logged, and kept in ``task.json``'s provenance).
    """
    model, note = _keep(imported, kind, num_labels, label_names, dropout)
    logger.info("init_from: %s", note)
    return model, note


def _keep(
    imported: TaskModel,
    kind: str,
    num_labels: int,
    label_names: Sequence[str] | None,
    dropout: float,
) -> tuple[TaskModel, str]:
    if imported.kind != kind:
        return _fresh(
            imported, kind, num_labels, label_names, dropout, f"the folder's is {imported.kind}"
        )
    if kind in ("classification", "tagging", "regression") and imported.num_labels != num_labels:
        why = f"the folder's has {imported.num_labels} labels, the task {num_labels}"
        return _fresh(imported, kind, num_labels, label_names, dropout, why)
    order = _row_order(imported, label_names) if kind in ("classification", "tagging") else None
    if kind in ("classification", "tagging") and order is None:
        why = f"the folder's labels {imported.label_names} are not the task's {list(label_names or [])}"
        return _fresh(imported, kind, num_labels, label_names, dropout, why)
    head = imported.head
    if order is not None and order != list(range(len(order))):
        with torch.no_grad():
            classifier = cast(torch.nn.Linear, head.classifier)
            classifier.weight.copy_(classifier.weight[order].clone())
            classifier.bias.copy_(classifier.bias[order].clone())
    head_dropout = getattr(head, "dropout", None)
    if isinstance(head_dropout, torch.nn.Dropout):
        head_dropout.p = dropout
    model = TaskModel(
        imported.encoder,
        head,
        kind,
        num_labels,
        label_names=label_names if kind in ("classification", "tagging") else None,
    )
    settings = head_settings(head)
    variant = ", ".join(
        f"{k}={v}" for k, v in settings.items() if k.startswith("pooler_") or k == "pool"
    )
    return model, f"task head kept from the folder ({kind}, {variant})"
