"""Fine-tuning VisualBERT and ViLBERT: saving and loading a fine-tuned ``final/``.

``final/`` holds ``model.safetensors`` + ``config.json`` (the backbone, as
``load_multimodal`` builds it), ``task_head.safetensors``, ``task.json``
(``"family": "multimodal"``) and the tokenizer. A ``multimodal_finetune.peft`` run's holds
``adapter.safetensors`` instead of the backbone, and ``task.json``'s ``"peft"`` points at
the pre-training ``final/`` it loads the frozen backbone from
(:func:`~ptm_core.finetune.peft_folder.save_adapter_folder`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import safetensors.torch
import torch
from torch import nn

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import (
    TASK_FORMAT_VERSION,
    TASK_HEAD_FILE,
    TASK_JSON,
    read_trained_state,
)
from ptm_core.finetune.peft_folder import check_base, load_adapter, read_peft_config
from ptm_core.peft import attach_peft
from ptm_multimodal.checkpoint_kinds import with_model_kind
from ptm_multimodal.task_model import (
    TASK_FAMILY,
    ImageTextTaskModel,
    build_task_head,
    load_backbone,
)
from ptm_multimodal.task_spec import IMAGE_TEXT_KINDS, ImageTextTask


def save_image_text_task_model(
    model: ImageTextTaskModel,
    directory: str | Path,
    *,
    tokenizer: TaskTokenizer,
    task_config: Mapping[str, Any],
) -> Path:
    """Write ``final/`` atomically (see the module docstring for the layout)."""
    text = json.dumps(task_record(model, task_config), indent=2) + "\n"
    backbone_config = with_model_kind(model.encoder.checkpoint_config())  # type: ignore[operator]
    config = json.dumps(backbone_config, indent=2, sort_keys=True) + "\n"
    with atomic_directory(directory) as tmp:
        safetensors.torch.save_model(model.encoder, str(tmp / "model.safetensors"))
        head = {k: v.detach().cpu().contiguous() for k, v in model.head.state_dict().items()}
        safetensors.torch.save_file(head, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        (tmp / "config.json").write_text(config, encoding="utf-8")
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")
        tokenizer.save(tmp)
    return Path(directory)


def task_record(model: ImageTextTaskModel, task_config: Mapping[str, Any]) -> dict[str, Any]:
    """``task.json`` of a fine-tuned model: the head's settings and ``task_config``."""
    return {
        "ptm_task": TASK_FORMAT_VERSION,
        "family": TASK_FAMILY,
        "architecture": model.architecture,
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        "dropout": float(cast(nn.Dropout, model.head.dropout).p),
        "head": model.answer_head,
        **dict(task_config),
    }


def load_image_text_task_model(
    directory: str | Path,
) -> tuple[ImageTextTaskModel, TaskTokenizer, ImageTextTask, dict[str, Any]]:
    """Load what :func:`save_image_text_task_model` wrote.

    Returns:
        ``(model in eval mode, tokenizer, task, task.json)``.

    Raises:
        CheckpointError: a missing or mismatched file, named with the fix.
    """
    from ptm_multimodal.loading import _build

    directory = Path(directory)
    task_path = directory / TASK_JSON
    try:
        record = json.loads(task_path.read_text(encoding="utf-8"))
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{directory}: cannot read task.json/config.json ({type(exc).__name__}: {exc}); "
            "pass the final/ folder of a multimodal fine-tuning run"
        ) from None
    if record.get("family") != TASK_FAMILY or record.get("kind") not in IMAGE_TEXT_KINDS:
        raise CheckpointError(
            f"{task_path}: field 'family' is {record.get('family')!r} and 'kind' "
            f"{record.get('kind')!r}; expected 'multimodal' and one of {IMAGE_TEXT_KINDS} "
            "(a final/ of ptm_multimodal.finetune)"
        )
    backbone: nn.Module
    if "peft" in record:  # the frozen backbone is the pre-trained folder it points at
        backbone, _, _ = load_backbone(check_base(directory, record))
    else:
        backbone = _build(config, str(directory / "config.json"))
        try:
            missing, unexpected = safetensors.torch.load_model(
                backbone, str(directory / "model.safetensors"), strict=False
            )
        except Exception as exc:
            raise CheckpointError(
                f"{directory / 'model.safetensors'}: cannot read the backbone ({type(exc).__name__}: "
                f"{exc}); copy the whole final/ folder again or fine-tune again"
            ) from None
        if missing or unexpected:
            raise CheckpointError(
                f"{directory / 'model.safetensors'}: missing {sorted(missing)}, unknown "
                f"{sorted(unexpected)}; the weights and config.json come from different models"
            )
    head = build_task_head(
        backbone,
        int(record["num_labels"]),
        float(record.get("dropout", 0.1)),
        head=str(record.get("head", "cls")),
    )
    state = read_trained_state(
        directory / TASK_HEAD_FILE,
        dict(head.state_dict()),
        what=f"{record['architecture']} {record['kind']} head",
        described=f"num_labels={record['num_labels']}",
        fix="copy both from the same save",
    )
    head.load_state_dict(state)
    model = ImageTextTaskModel(backbone, head, record["kind"], record["label_names"])
    if "peft" in record:
        config_peft = read_peft_config(directory, record)
        with torch.random.fork_rng(devices=[]):  # the fresh adapter is overwritten
            attach_peft(model, config_peft)
        load_adapter(model, directory, config_peft)
    tokenizer = load_task_tokenizer(directory)
    return model.eval(), tokenizer, ImageTextTask.from_mapping(record["task"]), record
