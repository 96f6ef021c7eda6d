"""``ptm export --format hf`` of a BART/T5 fine-tune's ``final/`` (``task.json`` with
``"seq2seq"``), whole or with a ``finetune.peft=lora|ia3`` adapter.

=====================  ====================================  ==========================
``final/``             Hugging Face class                    ``transformers`` auto class
=====================  ====================================  ==========================
classification head    ``BartForSequenceClassification``     ``AutoModelForSequence
(BART layout)          (:mod:`~ptm_core.checkpoints.hf.       Classification``
                       bart_tasks`)
text-to-text           ``BartForConditionalGeneration`` or   ``AutoModelForSeq2SeqLM``
                       ``T5ForConditionalGeneration``
=====================  ====================================  ==========================

An adapter run exports merged by default (LoRA folded into the weights: a plain folder with
ptm's logits), or with ``--peft-adapter`` as the base weights plus ``adapter/``, a ``peft``
adapter folder under BART's or T5's module names
(:func:`~ptm_core.checkpoints.hf.peft_adapter.bart_module_name`,
:func:`~ptm_core.checkpoints.hf.peft_adapter.t5_module_name`) that
``peft.PeftModel.from_pretrained(model, "<out>/adapter")`` loads onto it. A T5-layout
classification head has no export (ptm writes no ``T5ForSequenceClassification``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.io import CheckpointError

SEQ2SEQ_LM = "AutoModelForSeq2SeqLM"


@dataclass(frozen=True)
class Seq2SeqTaskExport:
    """What :func:`export_seq2seq_task` wrote.

    Attributes:
        family: ``bart`` or ``t5``.
        architecture: the ``architectures`` entry of the written ``config.json``.
        auto_class: the ``transformers`` auto class that loads it.
        heads: the heads written (``task:classification``, ``lm_head``).
    """

    family: str
    architecture: str
    auto_class: str
    heads: list[str]


def export_seq2seq_task(
    source: Path,
    target: Path,
    record: dict[str, Any],
    tokenizer_writer: Callable[[int | None], Callable[[Path], object]],
    *,
    peft_adapter: bool = False,
) -> Seq2SeqTaskExport:
    """Write the seq2seq fine-tune in ``source`` as a Hugging Face folder at ``target``.

    Args:
        source: the ``final/``.
        target: the folder to write (replaced as a whole).
        record: its ``task.json``.
        tokenizer_writer: given the tokenizer's ``model_max_length`` (``None`` for T5), the
            callable that writes the tokenizer files into a folder.
        peft_adapter: keep a LoRA/IA3 adapter apart as ``target/adapter`` (a ``peft``
            folder) instead of merging it.

    Raises:
        CheckpointError: a T5 classification head, a prompt/prefix run, or
            ``--peft-adapter`` on a run without an adapter; the message names the fix.
    """
    from ptm_core.checkpoints.hf.peft_adapter import bart_module_name, t5_module_name
    from ptm_core.checkpoints.hf.peft_export import prepare_peft_export, write_adapter_folder
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.finetune.seq2seq import CLASSIFICATION_HEAD
    from ptm_core.finetune.seq2seq_folder import load_seq2seq_adapter, load_seq2seq_task

    tokenizer = load_task_tokenizer(source)
    adapter: dict[str, Any] = {}
    if "peft" in record:
        network, adapter = prepare_peft_export(
            source,
            record,
            adapter=peft_adapter,
            load=lambda path, rec: load_seq2seq_adapter(path, rec, tokenizer),
        )
    elif peft_adapter:
        raise CheckpointError(
            f"{source}: --peft-adapter is for a finetune.peft=lora|ia3 final/; this model was "
            "fine-tuned whole: leave the flag out"
        )
    else:
        network = load_seq2seq_task(source, record, tokenizer)
    network.eval()
    seq2seq = network.model
    config = seq2seq.config
    family = "t5" if config.position_encoding == "t5_buckets" else "bart"
    classifier = record.get("seq2seq") == CLASSIFICATION_HEAD
    if classifier and family != "bart":
        raise CheckpointError(
            f"{source}: a T5 encoder-decoder with a classification head has no Hugging Face "
            "export in ptm (it writes no T5ForSequenceClassification); fine-tune it with "
            "finetune.text_to_text=true to export a T5ForConditionalGeneration, or score it "
            "with ptm evaluate / ptm predict"
        )
    write_tokenizer = tokenizer_writer(None if family == "t5" else config.max_positions)
    with atomic_directory(target, kind="export") as tmp:
        _write_model(network, tmp / "model", family, classifier)
        for path in (tmp / "model").iterdir():
            shutil.move(str(path), str(tmp / path.name))
        (tmp / "model").rmdir()
        write_tokenizer(tmp)
        if peft_adapter:
            names = (
                partial(t5_module_name, gated=config.gated_feed_forward)
                if family == "t5"
                else bart_module_name
            )
            base = str(Path(target).resolve())
            write_adapter_folder(tmp, adapter, record, "", base, module_name=names)
    if classifier:
        return Seq2SeqTaskExport(
            family,
            "BartForSequenceClassification",
            "AutoModelForSequenceClassification",
            [f"task:{record['kind']}"],
        )
    generation = "T5ForConditionalGeneration" if family == "t5" else "BartForConditionalGeneration"
    return Seq2SeqTaskExport(family, generation, SEQ2SEQ_LM, ["lm_head"])


def _write_model(network: Any, directory: Path, family: str, classifier: bool) -> None:
    from ptm_core.checkpoints.hf.bart import save_bart
    from ptm_core.checkpoints.hf.bart_tasks import export_hf_bart_classifier
    from ptm_core.checkpoints.hf.t5 import save_t5

    if classifier:
        export_hf_bart_classifier(network, directory)
    elif family == "t5":
        save_t5(network.model, directory)
    else:
        save_bart(network.model, directory)
