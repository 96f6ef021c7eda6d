"""ERNIE-THU fine-tuning, saving and loading a fine-tuned ``final/``."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import (
    TASK_HEAD_FILE,
    TASK_JSON,
    read_task_json,
    read_trained_state,
    write_task_directory,
)
from ptm_knowledge.ernie.task_model import (
    RECIPE,
    ErnieTaskModel,
    ernie_model_of_record,
)
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder


def save_ernie_task_model(
    model: ErnieTaskModel,
    directory: str | Path,
    *,
    entity_ids: Sequence[str],
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write ``final/`` atomically: the T-Encoder (``config.json``, ``model.safetensors``),
    ``task_head.safetensors`` (``knowledge.*``: aggregators, projection and entity table;
    ``head.*``: the task head), ``knowledge_config.json`` (the K-Encoder settings and
    ``entity_ids``) and ``task.json`` (``recipe: ernie_thu_finetune``)."""
    encoder = model.encoder
    state = {
        f"knowledge.{k}": v
        for k, v in encoder.state_dict().items()
        if not k.startswith("text_encoder.")
    }
    state.update({f"head.{k}": v for k, v in model.head.state_dict().items()})
    knowledge = json.dumps({**encoder.options, "entity_ids": list(entity_ids)}, indent=2) + "\n"

    def write_knowledge(tmp: Path) -> None:
        (tmp / KNOWLEDGE_CONFIG).write_text(knowledge, encoding="utf-8")

    return write_task_directory(
        encoder.text_encoder,
        state,
        model.settings(),
        task_config,
        directory,
        extra_writers=[write_knowledge, *extra_writers],
        writer="save_ernie_task_model",
    )


def load_ernie_task_model(directory: str | Path) -> tuple[ErnieTaskModel, dict[str, Any]]:
    """Load what :func:`save_ernie_task_model` wrote.

    Returns:
        ``(model, record)``: the model in eval mode and ``task.json`` (``entity_ids`` added
        from ``knowledge_config.json``).

    Raises:
        CheckpointError: not an ERNIE-THU fine-tuned folder, or mismatched files; the
            message names the file and the fix.
    """
    directory = Path(directory)
    record = read_task_json(directory / TASK_JSON)
    if record.get("recipe") != RECIPE:
        raise CheckpointError(
            f"{directory / TASK_JSON}: recipe is {record.get('recipe')!r}, not {RECIPE!r}; load "
            "this final/ with ptm_core.finetune.recipe.load_finetuned"
        )
    knowledge_path = directory / KNOWLEDGE_CONFIG
    if not knowledge_path.is_file():
        raise CheckpointError(
            f"{knowledge_path}: missing; copy the whole final/ folder finetune_ernie_thu wrote"
        )
    options = json.loads(knowledge_path.read_text(encoding="utf-8"))
    entity_ids = options.pop("entity_ids", None) or []
    if "peft" in record:  # adapter + head beside a pointer to the base ERNIE-THU folder
        from ptm_knowledge.ernie.peft_io import load_ernie_peft_model

        model = load_ernie_peft_model(directory, record)
        return model.eval(), {**record, "entity_ids": entity_ids}
    head_path = directory / TASK_HEAD_FILE
    stored = load_file(str(head_path)) if head_path.is_file() else {}
    table = stored.get("knowledge.entity_table", torch.zeros(len(entity_ids), 1))
    layers = options.pop("num_knowledge_layers")
    encoder = KnowledgeableEncoder(
        TransformerEncoder.from_pretrained(directory), table, layers, **options
    )
    model = ernie_model_of_record(encoder, record)
    expected = {
        **{
            f"knowledge.{k}": v
            for k, v in encoder.state_dict().items()
            if not k.startswith("text_encoder.")
        },
        **{f"head.{k}": v for k, v in model.head.state_dict().items()},
    }
    state = read_trained_state(
        head_path,
        expected,
        what="ERNIE-THU knowledge layers and task head",
        described=f"kind={record['kind']!r}, num_labels={record['num_labels']}, {KNOWLEDGE_CONFIG}",
        fix="copy task.json, knowledge_config.json and task_head.safetensors from the same run",
    )
    knowledge = {
        k.removeprefix("knowledge."): v for k, v in state.items() if k.startswith("knowledge.")
    }
    encoder.load_state_dict({**encoder.state_dict(), **knowledge})
    model.head.load_state_dict(
        {k.removeprefix("head."): v for k, v in state.items() if k.startswith("head.")}
    )
    return model.eval(), {**record, "entity_ids": entity_ids}


def is_ernie_finetuned(directory: str | Path) -> bool:
    """Whether ``directory`` is a ``final/`` of :func:`finetune_ernie_thu`."""
    path = Path(directory) / TASK_JSON
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("recipe") == RECIPE
    except (OSError, ValueError, AttributeError):
        return False


__all__ = [
    "is_ernie_finetuned",
    "load_ernie_task_model",
    "save_ernie_task_model",
]
