"""Loading a BART/T5/MASS fine-tune's ``final/`` (:func:`load_seq2seq_task`), and the
adapter ``final/`` of one with ``finetune.peft=lora|ia3|prompt|prefix``.

LoRA and IA3 wrap the encoder's and the decoder's attention (self and cross) and
feed-forward linears of the :class:`~ptm_core.encoders.encoder_decoder.EncoderDecoderModel`
(``peft_backbone = "model"`` on :class:`~ptm_core.finetune.seq2seq.Seq2SeqClassifier` and
:class:`~ptm_core.finetune.text_to_text.TextToTextModel`); a soft prompt wraps the model,
prefixes go into its three attentions (:mod:`ptm_core.peft.seq2seq_prompts`). The ``final/`` is core's adapter
layout (:func:`~ptm_core.finetune.peft_folder.save_adapter_folder`) with ptm's seq2seq
``config.json`` (what ``ptm evaluate`` and ``ptm predict`` dispatch on)::

    task.json               the seq2seq task record ("seq2seq": "classification_head" or
                            "text_to_text"), plus "peft": {method, settings, "base"}
    adapter.safetensors     LoRA A/B, IA3 scales, the prompt or the prefixes, names under
                            the encoder-decoder
    task_head.safetensors   the classification head (text-to-text: none, the LM head
                            stays frozen)
    config.json             the base encoder-decoder's config (ptm format)
    tokenizer files
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.checkpoints.seq2seq_ptm import write_config_json
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.model import TASK_JSON
from ptm_core.finetune.peft_folder import (
    check_base,
    load_adapter,
    read_peft_config,
    save_adapter_folder,
)
from ptm_core.finetune.seq2seq import (
    CLASSIFICATION_HEAD,
    TEXT_TO_TEXT,
    Seq2SeqClassifier,
    classifier_record,
    load_seq2seq_classifier,
)
from ptm_core.finetune.text_to_text import TextToTextModel, load_text_to_text, text_to_text_record
from ptm_core.peft import PeftConfig, attach_peft


def save_seq2seq_adapter(
    network: Seq2SeqClassifier | TextToTextModel,
    directory: str | Path,
    *,
    config: PeftConfig,
    base: str | Path,
    task_config: dict[str, Any],
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write the adapter ``final/`` of a seq2seq fine-tune (see the module docstring).

    Args:
        network: the classifier or text-to-text model with ``config``'s adapter attached.
        directory: the ``final/`` to write (replaced as a whole).
        config: the method it was trained with.
        base: the folder the frozen encoder-decoder was loaded from.
        task_config: JSON-ready settings for ``task.json`` (task, provenance).
        extra_writers: callables given the folder being written (the tokenizer).

    Returns:
        The directory written.
    """
    record = (
        classifier_record(network, task_config)
        if isinstance(network, Seq2SeqClassifier)
        else text_to_text_record(network, task_config)
    )
    seq2seq_config = network.model.config
    return save_adapter_folder(
        network,
        directory,
        config=config,
        base=base,
        record=record,
        extra_writers=extra_writers,
        write_config=lambda tmp: write_config_json(tmp, seq2seq_config),
    )


def load_seq2seq_adapter(
    directory: str | Path, record: dict[str, Any], tokenizer: TaskTokenizer
) -> nn.Module:
    """Load what :func:`save_seq2seq_adapter` wrote: base + adapter (+ head).

    Returns:
        The :class:`Seq2SeqClassifier` or :class:`TextToTextModel`, in training mode.

    Raises:
        CheckpointError: a missing or changed base, or adapter/head files that do not fit;
            the message names the file and the fix.
    """
    directory = Path(directory)
    config = read_peft_config(directory, record)
    base = check_base(directory, record)
    seq2seq = EncoderDecoderModel.from_pretrained(base)
    mode = record.get("seq2seq")
    network: Seq2SeqClassifier | TextToTextModel
    with torch.random.fork_rng(devices=[]):  # the adapter's fresh init is overwritten below
        if mode == CLASSIFICATION_HEAD:
            network = load_seq2seq_classifier(directory, record, model=seq2seq)
        elif mode == TEXT_TO_TEXT:
            network = load_text_to_text(directory, record, tokenizer, model=seq2seq)
        else:
            raise CheckpointError(
                f"{directory / TASK_JSON}: seq2seq is {mode!r}, not one of "
                f"{CLASSIFICATION_HEAD}, {TEXT_TO_TEXT}; fix the field or fine-tune again"
            )
        try:
            attach_peft(network, config)
        except ValueError as exc:
            raise CheckpointError(f"{directory / TASK_JSON}: peft: {exc}") from None
    load_adapter(network, directory, config)
    return network


def load_seq2seq_task(
    directory: str | Path, record: dict[str, Any], tokenizer: TaskTokenizer
) -> nn.Module:
    """The model of a seq2seq ``final/`` (``record``: its ``task.json``), in eval mode.

    Returns:
        a :class:`~ptm_core.finetune.seq2seq.Seq2SeqClassifier` or a
        :class:`~ptm_core.finetune.text_to_text.TextToTextModel` (with its adapter, on the
        base it points at, for a ``finetune.peft`` run).
    """
    mode = record.get("seq2seq")
    if "peft" in record:
        return load_seq2seq_adapter(directory, record, tokenizer).eval()
    if mode == CLASSIFICATION_HEAD:
        return load_seq2seq_classifier(directory, record).eval()
    if mode == TEXT_TO_TEXT:
        return load_text_to_text(directory, record, tokenizer).eval()
    raise CheckpointError(
        f"{Path(directory) / TASK_JSON}: seq2seq is {mode!r}, not one of "
        f"{CLASSIFICATION_HEAD}, {TEXT_TO_TEXT}; fix the field or fine-tune again"
    )
