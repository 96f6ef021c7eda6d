"""XLM zero-shot fine-tuning with a parameter-efficient method (``xlm_finetune.peft``).

The method is core's (:mod:`ptm_core.peft`): LoRA and IA3 adapt the shared encoder's
attention and feed-forward linears, prefix tuning puts keys and values in every layer; the
token, position and language tables stay frozen, so the cross-lingual alignment of the
vocabulary survives English-only training. Prompt tuning puts ``P`` vectors before the
tokens (positions ``0..P-1``, the tokens after them); XLM adds a language embedding at
every position, and the prompt's positions take the row's language (its first token's),
as XLM gives its shared special tokens the row's language (:class:`~ptm_multilingual.
model.XLMEncoder` declares ``langs`` for :class:`~ptm_core.peft.SoftPromptEncoder`), so
the prompt meets the encoder as the row's tokens do, in every language.

``final/`` is core's adapter layout (:func:`~ptm_core.finetune.peft_folder.save_adapter_folder`)
with XLM's ``task.json`` (``"family": "xlm"``) and the shared tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from ptm_core.finetune.model import TASK_HEAD_FILE, load_head_state
from ptm_core.finetune.peft_folder import check_base, load_adapter, read_peft_config
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.training import TrainerConfig


def check_xlm_peft(
    peft: PeftConfig, *, base: object, freeze: str, random_init: bool, trainer: TrainerConfig
) -> None:
    """Refuse, in one line naming the setting, what an XLM adapter run cannot do."""
    where = f"xlm_finetune.peft={peft.method}"
    if random_init:
        raise ValueError(
            f"{where} trains an adapter on the pre-trained XLM; set xlm_finetune.random_init=false"
        )
    if freeze != "none":
        raise ValueError(f"{where} freezes the whole encoder itself; set xlm_finetune.freeze=none")
    if not isinstance(base, (str, Path)):
        raise ValueError(f"{where} needs the XLM folder (the adapter points at it), not a model")
    if trainer.unfreeze_every > 0:
        raise ValueError(f"{where}: trainer.unfreeze_every would unfreeze the encoder; set it to 0")


def load_xlm_peft_classifier(
    directory: Path, record: dict[str, Any], build: Callable[[Path], torch.nn.Module]
) -> torch.nn.Module:
    """Load an adapter ``final/``: ``build(base folder)`` gives the classifier with a fresh
    head; the adapter and the head are read from ``directory``.

    Raises:
        CheckpointError: a missing or changed base, or files that do not fit (one line).
    """
    config = read_peft_config(directory, record)
    base = check_base(directory, record)
    with torch.random.fork_rng(devices=[]):  # the fresh head and adapter are overwritten
        model = build(base)
        attach_peft(model, config)
    load_adapter(model, directory, config)
    load_head_state(cast(torch.nn.Module, model.head), directory / TASK_HEAD_FILE, record)
    return model


__all__ = ["check_xlm_peft", "load_xlm_peft_classifier"]
