"""The task fine-tune of ptm-core's Transformer families: their specs' ``finetune`` hooks.

``init_from`` is a folder of the family the runner picked by its kind (a ptm ``final/``, a
Hugging Face BERT/ALBERT/ELECTRA/XLNet folder, a ``...For<Task>`` task folder, whose head
is kept when it fits the task, or a BART/T5 one); its own tokenizer is used. Without it the ``model`` preset is built at random init
with the ``tokenizer`` vocabulary. ``finetune.random_init=true`` keeps a checkpoint's
architecture and tokenizer but re-initialises its weights: the "same model without
pre-training" baseline. An encoder-decoder fine-tunes whole (BART's classification head
on the decoder's last end token, or T5's label generation with ``finetune.text_to_text``),
or as a frozen model under a LoRA/IA3 adapter with ``finetune.peft``.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.core_settings import TaskFinetuneSettings
from ptm_core.families.runner import FinetuneRun
from ptm_core.finetune.data import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import TaskModel
from ptm_core.finetune.recipe import FinetuneResult, finetune
from ptm_core.finetune.seq2seq import load_seq2seq_tokenizer
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft.config import PeftConfig
from ptm_core.tokenization import WordPieceTokenizer

Model = TransformerEncoder | EncoderDecoderModel | TaskModel
Loader = Callable[[Path, bool, int], tuple[Model, TaskTokenizer]]


def finetune_encoder(run: FinetuneRun) -> FinetuneResult:
    """The ``encoder`` and ``xlnet`` families' hook (``run.settings``:
    :class:`TaskFinetuneSettings`)."""
    return _finetune(run, _load_encoder)


def finetune_encoder_decoder(run: FinetuneRun) -> FinetuneResult:
    """The ``seq2seq`` family's hook: the whole encoder-decoder fine-tunes (or, with
    ``finetune.peft=lora|ia3``, an adapter on it)."""
    return _finetune(run, _load_encoder_decoder)


def _finetune(run: FinetuneRun, load: Loader) -> FinetuneResult:
    settings: TaskFinetuneSettings = run.settings
    if settings.task is None:
        raise ValueError("no task: give task=<name> (configs/task/) to fine-tune on")
    task = TaskSpec.from_mapping(settings.task)
    task.check_files()  # before any model is built or loaded
    options = settings.finetune
    variants: dict[str, dict[str, Any]] = {}
    peft = PeftConfig.from_options(options)
    if peft.enabled and (not run.init_from or options.random_init):
        raise ValueError(
            f"finetune.peft={peft.method} trains an adapter on a pre-trained model: give "
            "model=<a final/ or Hugging Face folder> (init_from) and finetune.random_init=false"
        )
    if run.init_from:
        directory = Path(run.init_from)
        if not directory.is_dir():
            raise FileNotFoundError(
                f"init_from={run.init_from}: no such directory; give a final/ directory of a "
                "ptm run or a Hugging Face model directory"
            )
        model, tokenizer = load(directory, options.random_init, run.seed)
        if load is _load_encoder:  # a fresh head in the folder's family's variant
            from ptm_core.checkpoints.hf.bert_tasks import hf_head_variants

            variants = hf_head_variants(directory)
    else:
        model, tokenizer = _from_preset(run, settings)
    return finetune(
        task,
        encoder=model,
        tokenizer=tokenizer,
        trainer=run.trainer,
        seed=run.seed,
        dropout=options.dropout,
        feature_based=options.feature_based,
        text_to_text=options.text_to_text,
        lstm_hidden=options.lstm_hidden,
        num_workers=options.num_workers,
        group_by_length=options.group_by_length,
        provenance={"init_from": run.init_from or None, "random_init": options.random_init},
        head_variants=variants,
        peft=peft,
        base=run.init_from or None,
    )


def _load_encoder(directory: Path, random_init: bool, seed: int) -> tuple[Model, TaskTokenizer]:
    from ptm_core.checkpoints.hf.bert_tasks import is_hf_task_directory, load_hf_task_model

    tokenizer = load_task_tokenizer(directory)
    if is_hf_task_directory(directory):
        # A ...For<Task> folder: its head too, kept by the recipe where it fits the task.
        model: TransformerEncoder | TaskModel = load_hf_task_model(directory)
        encoder = cast(TransformerEncoder, model.encoder)
    else:
        model = encoder = TransformerEncoder.from_pretrained(directory)
    if random_init:
        torch.manual_seed(seed)
        return encoder_from_config(encoder.config), tokenizer
    return model, tokenizer


def _load_encoder_decoder(
    directory: Path, random_init: bool, seed: int
) -> tuple[Model, TaskTokenizer]:
    model = EncoderDecoderModel.from_pretrained(directory)
    if random_init:
        torch.manual_seed(seed)
        model = EncoderDecoderModel(model.config)
    return model, load_seq2seq_tokenizer(directory)


def _from_preset(run: FinetuneRun, settings: TaskFinetuneSettings) -> tuple[Model, TaskTokenizer]:
    if run.model is None:
        raise ValueError("no model: give model=<a final/ directory> or model=<a preset>")
    if settings.tokenizer is None:
        raise ValueError(
            "tokenizer is null: a model built from a preset needs a vocabulary "
            "(tokenizer=<vocab.txt or tokenizer directory>), or give model=<a final/ directory>"
        )
    path = Path(settings.tokenizer)
    tokenizer = (
        WordPieceTokenizer.from_vocab(path, lowercase=settings.lowercase)
        if path.is_file()
        else WordPieceTokenizer.from_directory(path)
    )
    torch.manual_seed(run.seed)
    if _builds_encoder_decoder(run.model):
        vocab = tokenizer.vocab_info  # [PAD] pads, [CLS] starts, [SEP] ends
        return run.model(
            vocab_size=tokenizer.vocab_size,
            pad_token_id=vocab.pad_id,
            bos_token_id=vocab.cls_id,
            eos_token_id=vocab.sep_id,
            decoder_start_token_id=vocab.cls_id,
        ), tokenizer
    return run.model(vocab_size=tokenizer.vocab_size), tokenizer


def _builds_encoder_decoder(factory: Any) -> bool:
    """Whether the preset's builder is annotated to return an encoder-decoder (it is then
    called with the tokenizer's special ids too)."""
    while isinstance(factory, functools.partial):
        factory = factory.func
    try:
        returned = typing.get_type_hints(factory).get("return")
    except (NameError, TypeError):
        return False
    return isinstance(returned, type) and issubclass(returned, EncoderDecoderModel)
