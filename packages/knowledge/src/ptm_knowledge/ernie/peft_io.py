"""ERNIE-THU with a parameter-efficient method (``finetune.peft``): attach, save, load.

The method is core's (:mod:`ptm_core.peft`): LoRA and IA3 adapt the T-Encoder's and the
knowledge layers' named linears (attention projections, feed-forward and fusion linears);
prefix tuning puts its keys and values in every T-Encoder layer; prompt tuning puts ``P``
vectors before the T-Encoder's tokens, aligned to no entity (like ``[CLS]``), so every
token keeps its own entity ``P`` positions further on and the knowledge layers see the
prompt as tokens without an entity (:class:`~ptm_knowledge.ernie.thu_encoder.
KnowledgeableEncoder` declares its ``entity_ids`` for :class:`~ptm_core.peft.
SoftPromptEncoder`). The entity table and its projection stay frozen.

``final/`` is core's adapter layout (:mod:`ptm_core.finetune.peft_folder`) plus ERNIE's
``knowledge_config.json``: ``task.json`` (``recipe: ernie_thu_finetune`` and ``"peft"``
with the base folder's path and fingerprint), ``adapter.safetensors``,
``task_head.safetensors`` (the head only), the base's ``config.json`` and the tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.model import TASK_FORMAT_VERSION, TASK_HEAD_FILE, load_head_state
from ptm_core.finetune.peft_folder import (
    check_base,
    load_adapter,
    read_peft_config,
    save_adapter_folder,
)
from ptm_core.peft import PeftConfig, attach_peft
from ptm_knowledge.ernie.task_model import ErnieTaskModel, ernie_model_of_record
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder


def attach_ernie_peft(model: ErnieTaskModel, config: PeftConfig) -> ErnieTaskModel:
    """Freeze ``model.encoder`` and put ``config``'s method on it (see the module docstring)."""
    attach_peft(model, config)
    return model


def save_ernie_peft_model(
    model: ErnieTaskModel,
    directory: str | Path,
    *,
    config: PeftConfig,
    base: str | Path,
    entity_ids: Sequence[str],
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write the adapter-only ``final/`` of an ERNIE-THU run (atomically).

    Args:
        model: the task model with ``config``'s adapter attached.
        directory: the ``final/`` to write.
        config: the method.
        base: the ERNIE-THU folder the frozen encoder was loaded from.
        entity_ids: the entity table's ids (``knowledge_config.json``, as predict reads them).
        task_config: JSON-ready settings for ``task.json`` (task, KG, linker, provenance).
        extra_writers: callables given the folder being written (the tokenizer).

    Returns:
        The directory written.
    """
    record = {"ptm_task": TASK_FORMAT_VERSION, **model.settings(), **task_config}
    knowledge = {**model.encoder.options, "entity_ids": list(entity_ids)}

    def write_knowledge(tmp: Path) -> None:
        (tmp / KNOWLEDGE_CONFIG).write_text(json.dumps(knowledge, indent=2) + "\n")

    return save_adapter_folder(
        model,
        directory,
        config=config,
        base=base,
        record=record,
        extra_writers=[write_knowledge, *extra_writers],
    )


def load_ernie_peft_model(directory: Path, record: dict[str, Any]) -> ErnieTaskModel:
    """Load what :func:`save_ernie_peft_model` wrote: base + adapter + head.

    Raises:
        CheckpointError: a missing or changed base, or adapter/head files that do not fit
            (one line naming the file and the fix).
    """
    config = read_peft_config(directory, record)
    encoder = KnowledgeableEncoder.from_pretrained(check_base(directory, record))
    with torch.random.fork_rng(devices=[]):  # the fresh head and adapter are overwritten
        model = ernie_model_of_record(encoder, record)
        attach_ernie_peft(model, config)
    load_adapter(model, directory, config)
    load_head_state(model.head, directory / TASK_HEAD_FILE, record)
    return model


__all__ = ["attach_ernie_peft", "load_ernie_peft_model", "save_ernie_peft_model"]
