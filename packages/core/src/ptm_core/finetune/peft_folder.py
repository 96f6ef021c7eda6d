"""A parameter-efficient fine-tune's ``final/``: adapter + head beside a pointer to the base.

Layout (written atomically)::

    task.json               the task record, plus "peft": {method, settings,
                            "base": {"path", "sha256"}}
    adapter.safetensors     the adapter's tensors (names under the encoder)
    task_head.safetensors   the task head
    config.json             the base encoder's config (what evaluation dispatch reads)
    tokenizer files

The base model is not copied: ``base.path`` names its folder (absolute) and ``base.sha256``
fingerprints its ``config.json`` and ``*.safetensors`` files, checked at every load.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import save_file

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.io import PTM_ENCODER_FORMAT, CheckpointError, write_json
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import (
    TASK_FORMAT_VERSION,
    TASK_HEAD_FILE,
    TASK_JSON,
    TaskModel,
    head_settings,
    load_head_state,
    read_trained_state,
    task_model_of_record,
)
from ptm_core.model_kinds import ENCODER, XLNET, with_kind
from ptm_core.peft import PeftConfig, adapter_state, attach_peft
from ptm_core.peft.attach import backbone

ADAPTER_FILE = "adapter.safetensors"
PEFT_KEY = "peft"


def base_fingerprint(directory: Path) -> str:
    """SHA-256 over a model folder's ``config.json`` and ``*.safetensors`` (names and bytes)."""
    digest = hashlib.sha256()
    files = [directory / "config.json", *sorted(directory.glob("*.safetensors"))]
    for path in files:
        if not path.is_file():
            continue
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def peft_record(config: PeftConfig, base: str | Path) -> dict[str, Any]:
    """``task.json``'s ``"peft"``: the method's settings and the base folder's path and
    fingerprint."""
    base = Path(base).resolve()
    return {**config.to_dict(), "base": {"path": str(base), "sha256": base_fingerprint(base)}}


def save_peft_task_model(
    model: TaskModel,
    directory: str | Path,
    *,
    config: PeftConfig,
    base: str | Path,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write the adapter, the head and ``task.json`` (with the base's path and fingerprint).

    Args:
        model: the task model with ``config``'s adapter attached.
        directory: the ``final/`` to write (replaced as a whole).
        config: the method it was trained with.
        base: the folder the frozen encoder was loaded from.
        task_config: JSON-ready settings for ``task.json`` (task, provenance).
        extra_writers: callables given the folder being written (the tokenizer).

    Returns:
        The directory written.
    """
    inner = cast(TransformerEncoder, base_encoder(model))
    record: dict[str, Any] = {
        "ptm_task": TASK_FORMAT_VERSION,
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        **head_settings(model.head),
        **task_config,
        PEFT_KEY: peft_record(config, base),
    }
    kind = XLNET if inner.config.relative else ENCODER  # as checkpoints.encoder names it
    encoder_config = with_kind({"ptm_format": PTM_ENCODER_FORMAT, **inner.config.to_dict()}, kind)
    adapter = adapter_state(model)
    head = {k: v.detach().contiguous() for k, v in model.head.state_dict().items()}
    with atomic_directory(directory) as tmp:
        save_file(adapter, str(tmp / ADAPTER_FILE), metadata={"format": "pt"})
        save_file(head, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        write_json(tmp / "config.json", encoder_config)
        (tmp / TASK_JSON).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        for writer in extra_writers:
            writer(tmp)
    return Path(directory)


def save_adapter_folder(
    model: torch.nn.Module,
    directory: str | Path,
    *,
    config: PeftConfig,
    base: str | Path,
    record: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
    write_config: Callable[[Path], object] | None = None,
) -> Path:
    """The adapter ``final/`` of a family's own task model (ERNIE-THU, XLM, BART/T5),
    atomically: ``adapter.safetensors`` (under the model's backbone, :func:`~ptm_core.peft.
    attach.backbone`), ``task_head.safetensors`` (``model.head``; none for a model without
    one, such as T5's text-to-text whose LM head stays frozen), a ``config.json`` and
    ``task.json`` (``record`` plus ``"peft"``).

    Args:
        write_config: writes ``config.json`` into the folder being written; default: a copy
            of the base folder's own (it names the family).

    Returns:
        The directory written.
    """
    base = Path(base)
    text = json.dumps({**record, PEFT_KEY: peft_record(config, base)}, indent=2) + "\n"
    head = cast("torch.nn.Module | None", getattr(model, "head", None))
    with atomic_directory(directory) as tmp:
        save_file(adapter_state(model), str(tmp / ADAPTER_FILE), metadata={"format": "pt"})
        if head is not None:
            head_state = {k: v.detach().contiguous() for k, v in head.state_dict().items()}
            save_file(head_state, str(tmp / TASK_HEAD_FILE), metadata={"format": "pt"})
        if write_config is None:
            shutil.copyfile(base / "config.json", tmp / "config.json")
        else:
            write_config(tmp)
        (tmp / TASK_JSON).write_text(text, encoding="utf-8")
        for writer in extra_writers:
            writer(tmp)
    return Path(directory)


def base_encoder(model: TaskModel) -> torch.nn.Module:
    """The frozen encoder under a soft-prompt wrapper (or the encoder itself)."""
    encoder = model.encoder
    return cast(torch.nn.Module, getattr(encoder, "encoder", encoder))


def load_base_encoder(base: Path) -> TransformerEncoder:
    """The base encoder of an adapter: a ptm folder, a Hugging Face encoder folder, or a
    ``...For<Task>`` folder (its encoder)."""
    from ptm_core.checkpoints.hf.bert_tasks import is_hf_task_directory, load_hf_task_model

    if is_hf_task_directory(base):
        return cast(TransformerEncoder, load_hf_task_model(base).encoder)
    return TransformerEncoder.from_pretrained(base)


def check_base(directory: Path, record: dict[str, Any]) -> Path:
    """The base folder ``task.json`` points at, after checking it is there and unchanged."""
    task_path = directory / TASK_JSON
    pointer = record[PEFT_KEY].get("base") if isinstance(record[PEFT_KEY], dict) else None
    if not isinstance(pointer, dict) or not isinstance(pointer.get("path"), str):
        raise CheckpointError(
            f"{task_path}: peft.base.path is missing; the adapter needs its base model folder. "
            "Fine-tune again"
        )
    base = Path(pointer["path"])
    if not base.is_dir():
        raise CheckpointError(
            f"{task_path}: the base model folder {base} of this adapter is missing; restore it "
            "there, or set peft.base.path in task.json to its new place"
        )
    if pointer.get("sha256") != base_fingerprint(base):
        raise CheckpointError(
            f"{task_path}: the base model folder {base} has changed since this adapter was "
            "trained (config.json/*.safetensors differ from peft.base.sha256); restore the "
            "original base, or fine-tune again on the new one"
        )
    return base


def load_peft_task_model(directory: str | Path, record: dict[str, Any]) -> TaskModel:
    """Load a ``final/`` written by :func:`save_peft_task_model`: base + adapter + head.

    Raises:
        CheckpointError: a missing or changed base, or adapter/head files that do not fit;
            the message names the file and the fix.
    """
    directory = Path(directory)
    config = read_peft_config(directory, record)
    base = check_base(directory, record)
    encoder = load_base_encoder(base)
    with torch.random.fork_rng(devices=[]):  # the adapter's fresh init is overwritten below
        model = task_model_of_record(encoder, record, directory / TASK_JSON)
        attach_peft(model, config)
    load_adapter(model, directory, config)
    load_head_state(model.head, directory / TASK_HEAD_FILE, record)
    return model


def read_peft_config(directory: Path, record: dict[str, Any]) -> PeftConfig:
    """The method ``task.json``'s ``"peft"`` records (``CheckpointError`` naming the file)."""
    try:
        settings = {k: v for k, v in record[PEFT_KEY].items() if k != "base"}
        return PeftConfig.from_dict(settings)
    except (AttributeError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{directory / TASK_JSON}: peft: {exc}") from None


def load_adapter(model: torch.nn.Module, directory: Path, config: PeftConfig) -> None:
    """Load ``directory``'s ``adapter.safetensors`` into the model's backbone
    (``model.encoder``, or what ``peft_backbone`` names), which carries ``config``'s freshly
    attached adapter (``CheckpointError`` on tensors that do not fit)."""
    state = read_trained_state(
        directory / ADAPTER_FILE,
        adapter_state(model),
        what=f"{config.method} adapter",
        described=f"peft {config.to_dict()}",
        fix="copy adapter.safetensors and task.json from the same run",
    )
    unknown = backbone(model).load_state_dict(state, strict=False).unexpected_keys
    if unknown:
        raise CheckpointError(f"{directory / ADAPTER_FILE}: unknown tensors {unknown}")
