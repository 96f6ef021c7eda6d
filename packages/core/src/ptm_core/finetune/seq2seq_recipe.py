"""Fine-tuning an encoder-decoder (BART, T5, MASS) on a GLUE-format task.

Two modes: BART's classification head on the decoder's last end token
(:mod:`ptm_core.finetune.seq2seq`) and T5's text-to-text label generation
(:mod:`ptm_core.finetune.text_to_text`). Either trains whole, or, with
``finetune.peft=lora|ia3|prompt|prefix``, as a frozen encoder-decoder with an adapter
(:mod:`ptm_core.finetune.seq2seq_folder`). :func:`~ptm_core.finetune.recipe.finetune`
dispatches here for an encoder-decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from torch import nn

from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.finetune.scoring import FinetuneResult, train_task
from ptm_core.finetune.seq2seq import (
    SEQ2SEQ_KINDS,
    Seq2SeqClassifier,
    check_special_ids,
    save_seq2seq_classifier,
)
from ptm_core.finetune.seq2seq_folder import save_seq2seq_adapter
from ptm_core.finetune.task_data import read_task
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.finetune.text_to_text import (
    TextToTextFeaturizer,
    TextToTextModel,
    save_text_to_text,
)
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.training import TrainerConfig


def finetune_seq2seq(
    task: TaskSpec,
    *,
    model: EncoderDecoderModel,
    tokenizer: TaskTokenizer,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    text_to_text: bool = False,
    num_workers: int = 0,
    group_by_length: bool = True,
    provenance: dict[str, Any] | None = None,
    peft: PeftConfig | None = None,
    base: str | Path | None = None,
) -> FinetuneResult:
    """Fine-tune an encoder-decoder on a GLUE-format task and score its dev set.

    Args:
        task: a ``classification`` or ``regression`` task (text-to-text: classification).
        model: the pre-trained (or re-initialised) encoder-decoder.
        tokenizer: its tokenizer (``[PAD]``/``[SEP]`` = the model's pad/end ids).
        trainer: core trainer settings, the ULMFiT switches included
            (``schedule=slanted_triangular``; ``layer_lr_decay`` and ``unfreeze_every``
            over the depths of :func:`~ptm_core.training.finetuning.encoder_decoder_depth`:
            head, decoder layers top down, encoder layers top down, embeddings).
        seed: batch order seed.
        dropout: head dropout (classification head only).
        text_to_text: T5's mode (:mod:`ptm_core.finetune.text_to_text`): generate the
            label's name and score exact matches, instead of a classification head.
        num_workers: DataLoader processes.
        group_by_length: batch rows of similar length together.
        provenance: facts for ``task.json``.
        peft: LoRA or IA3 (:mod:`ptm_core.peft`) on the encoder's and the decoder's
            attention (self and cross) and feed-forward linears, a soft prompt before the
            encoder's input or prefixes in all three attentions
            (:mod:`ptm_core.peft.seq2seq_prompts`): the encoder-decoder stays
            frozen, the adapter and the classification head train, and ``final/`` holds only
            those (:mod:`ptm_core.finetune.seq2seq_folder`), pointing at ``base``.
        base: the folder ``model`` was loaded from (needed with ``peft``).

    Returns:
        :class:`~ptm_core.finetune.scoring.FinetuneResult`, as the recipe writes it.
    """
    if task.format != "glue" or task.kind not in SEQ2SEQ_KINDS:
        raise ValueError(
            f"task {task.name}: encoder-decoders fine-tune on GLUE-format classification or "
            f"regression tasks; this one is {task.kind} in {task.format} format. Use a "
            "BERT-family model for it"
        )
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None and base is None:
        raise ValueError(
            f"task {task.name}: finetune.peft={peft.method} trains an adapter on a pre-trained "
            "encoder-decoder: give init_from=<its folder> (model=<a final/ or Hugging Face "
            "folder>), without finetune.random_init"
        )
    check_special_ids(model, tokenizer, "model")
    task.check_files()
    train = read_task(task, "train", tokenizer)
    dev = read_task(task, "dev", tokenizer, train.label_names)
    record_extra = {
        "task": task.to_dict(),
        "feature_based": False,
        **({"provenance": provenance} if provenance else {}),
    }
    network: nn.Module
    save_final: Callable[[Path], object]
    if text_to_text:
        if task.kind != "classification":
            raise ValueError(
                f"task {task.name}: text_to_text generates a label name, so the task must be "
                f"a classification task, not {task.kind}; set finetune.text_to_text=false"
            )
        t2t = TextToTextModel(model, tokenizer, train.label_names)
        network = t2t
        featurizer: Any = TextToTextFeaturizer.for_model(t2t, tokenizer, task.max_length)

        def save_final(directory: Path) -> None:
            if peft is not None:
                save_seq2seq_adapter(
                    t2t,
                    directory,
                    config=peft,
                    base=cast(Path, base),
                    task_config=record_extra,
                    extra_writers=[tokenizer.save],
                )
            else:
                save_text_to_text(
                    t2t, directory, task_config=record_extra, extra_writers=[tokenizer.save]
                )

    else:
        num_labels = 1 if task.kind == "regression" else len(train.label_names)
        classifier = Seq2SeqClassifier(
            model, task.kind, num_labels, dropout, label_names=train.label_names or None
        )
        network = classifier
        featurizer = train.featurizer

        def save_final(directory: Path) -> None:
            if peft is not None:
                save_seq2seq_adapter(
                    classifier,
                    directory,
                    config=peft,
                    base=cast(Path, base),
                    task_config=record_extra,
                    extra_writers=[tokenizer.save],
                )
            else:
                save_seq2seq_classifier(
                    classifier, directory, task_config=record_extra, extra_writers=[tokenizer.save]
                )

    if peft is not None:
        attach_peft(network, peft)
    return train_task(
        network,
        task,
        train,
        dev,
        trainer,
        save_final=save_final,
        seed=seed,
        num_workers=num_workers,
        group_by_length=group_by_length,
        featurizer=featurizer,
        peft=peft,
    )
