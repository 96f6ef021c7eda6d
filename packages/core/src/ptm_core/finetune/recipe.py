"""One fine-tuning recipe for every task kind, on the core Trainer.

BERT's second stage (Devlin et al., 2019, section 4): put a task head on the pre-trained
encoder and train everything on the labelled data. The data side reads the task's files
(:mod:`ptm_core.finetune.data`), the model side is a :class:`~ptm_core.finetune.model.TaskModel`
(or, in the feature-based mode of TagLM/ELMo, a
:class:`~ptm_core.finetune.feature_based.FeatureBasedTagger` over the frozen encoder), and
the run is :func:`~ptm_core.training.run.train_and_save`: resume, bf16 on CUDA, DDP, the
ULMFiT switches of :class:`~ptm_core.training.TrainerConfig` and the metrics log come from
there. After training the dev set is scored with the task's metrics and ``eval.json`` is
written beside ``final/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.swag import swag_table
from ptm_core.finetune.data.tables import TableFile
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.imported_head import keep_imported_head
from ptm_core.finetune.model import (
    TASK_JSON,
    TaskModel,
    build_task_model,
    load_task_model,
    read_task_json,
    save_task_model,
)
from ptm_core.finetune.scoring import FinetuneResult, evaluate_task, train_task
from ptm_core.finetune.seq2seq_folder import load_seq2seq_task
from ptm_core.finetune.seq2seq_recipe import finetune_seq2seq
from ptm_core.finetune.task_data import read_task, task_num_labels
from ptm_core.finetune.task_loaders import task_loader
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.finetune.text_to_text import evaluate_text_to_text
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig

# FinetuneResult, evaluate_task and read_task live in scoring/task_data; flows/ still
# imports them from here.
__all__ = [
    "FinetuneResult",
    "evaluate_task",
    "finetune",
    "finetune_seq2seq",
    "load_finetuned",
    "load_seq2seq_task",
    "predict",
    "read_task",
]


def finetune(
    task: TaskSpec,
    *,
    encoder: TransformerEncoder | EncoderDecoderModel | TaskModel,
    tokenizer: TaskTokenizer,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    feature_based: bool = False,
    text_to_text: bool = False,
    lstm_hidden: int = 128,
    num_workers: int = 0,
    group_by_length: bool = True,
    provenance: dict[str, Any] | None = None,
    head_variants: dict[str, dict[str, Any]] | None = None,
    peft: PeftConfig | None = None,
    base: str | Path | None = None,
) -> FinetuneResult:
    """Fine-tune ``encoder`` on ``task`` and score the result on the task's dev set.

    Args:
        task: the task (kind, files, lengths, metric).
        encoder: the pre-trained encoder (or a random one, for the baseline); an
            encoder-decoder (BART/T5) runs :func:`finetune_seq2seq`; a :class:`TaskModel`
            (a Hugging Face ``...For<Task>`` folder) keeps its head where it fits the task
            (:func:`~ptm_core.finetune.imported_head.keep_imported_head`).
        tokenizer: its tokenizer (saved into ``final/``): BERT WordPiece, or any Hugging
            Face ``tokenizer.json`` (:class:`~ptm_core.finetune.data.task_tokenizer.HFTokenizer`:
            RoBERTa/BART byte-level BPE, ALBERT/XLNet/T5 Unigram).
        trainer: core trainer settings, the ULMFiT switches included
            (``schedule=slanted_triangular``, ``layer_lr_decay``, ``unfreeze_every``).
        seed: batch order seed (the trainer's ``seed`` sets initialisation and dropout).
        dropout: head dropout.
        feature_based: tagging only: freeze the encoder and train a BiLSTM-CRF on a
            learned scalar mix of its layers (TagLM/ELMo) instead of fine-tuning it.
        lstm_hidden: the BiLSTM's hidden size per direction (feature-based mode).
        text_to_text: encoder-decoders only: T5's text-to-text mode (generate the label).
        num_workers: DataLoader processes that featurize training batches.
        group_by_length: batch rows of similar length together
            (:mod:`~ptm_core.finetune.data.length_groups`).
        provenance: JSON-ready facts to record in ``task.json`` (``init_from``, ...).
        head_variants: task kind -> the fresh head's ``pool``/``activation``/
            ``input_dropout`` (an imported ELECTRA or XLNet folder's own head,
            :func:`~ptm_core.checkpoints.hf.bert_tasks.hf_head_variants`); BERT's otherwise.
        peft: a parameter-efficient method (:mod:`ptm_core.peft`): the encoder stays
            frozen, the adapter and the head train, and ``final/`` holds only those
            (:mod:`ptm_core.finetune.peft_folder`), pointing at ``base``.
        base: the folder ``encoder`` was loaded from (needed with ``peft``).

    Returns:
        :class:`FinetuneResult`; ``<output_dir>/final/`` holds the model, its tokenizer
        and ``task.json``, ``<output_dir>/eval.json`` the dev metrics (and
        ``parameters/trainable``, ``parameters/trainable_share``).
    """
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None:
        check_peft_run(task, peft, encoder, base, trainer, feature_based=feature_based)
    # The new head's initial weights come from the global RNG: seed it from the run's seed,
    # so the same seed gives the same run in any process (the trainer seeds only later).
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    imported = encoder if isinstance(encoder, TaskModel) else None
    if isinstance(encoder, TaskModel):
        encoder = cast(TransformerEncoder, encoder.encoder)
    if isinstance(encoder, EncoderDecoderModel) and not feature_based:
        return finetune_seq2seq(
            task,
            model=encoder,
            tokenizer=tokenizer,
            trainer=trainer,
            seed=seed,
            dropout=dropout,
            text_to_text=text_to_text,
            num_workers=num_workers,
            group_by_length=group_by_length,
            provenance=provenance,
            peft=peft,
            base=base,
        )
    if text_to_text or isinstance(encoder, EncoderDecoderModel):
        raise ValueError(
            f"task {task.name}: "
            + (
                "feature_based mode needs a BERT-family encoder, not an encoder-decoder"
                if feature_based
                else "text_to_text needs an encoder-decoder (a BART/T5 final/)"
            )
            + f"; set finetune.{'feature_based' if feature_based else 'text_to_text'}=false"
        )
    task.check_files()
    train = read_task(task, "train", tokenizer)
    dev = read_task(task, "dev", tokenizer, train.label_names)
    num_labels = task_num_labels(task, train)
    model: Any  # TaskModel, or FeatureBasedTagger in the feature-based mode
    if feature_based:
        if task.kind != "tagging":
            raise ValueError(
                f"task {task.name}: feature_based mode is for tagging tasks (TagLM/ELMo); "
                f"this task is {task.kind}. Set finetune.feature_based=false"
            )
        from ptm_core.finetune.feature_based import FeatureBasedTagger

        model = FeatureBasedTagger(
            encoder,
            num_labels,
            lstm_hidden=lstm_hidden,
            dropout=dropout,
            label_names=train.label_names,
        )
    elif imported is not None:
        model, note = keep_imported_head(
            imported, task.kind, num_labels, train.label_names or None, dropout
        )
        provenance = {**(provenance or {}), "task_head": note}
    else:
        variant = (head_variants or {}).get(task.kind, {})
        model = build_task_model(
            encoder,
            task.kind,
            num_labels,
            dropout,
            label_names=train.label_names or None,
            **variant,
        )
    record = {
        "task": task.to_dict(),
        "feature_based": feature_based,
        **({"provenance": provenance} if provenance else {}),
    }

    def save_final(directory: Path) -> None:
        if peft is not None:
            from ptm_core.finetune.peft_folder import save_peft_task_model

            save_peft_task_model(
                model,
                directory,
                config=peft,
                base=cast(Path, base),
                task_config=record,
                extra_writers=[tokenizer.save],
            )
        elif feature_based:
            from ptm_core.finetune.feature_based import save_feature_based_tagger

            save_feature_based_tagger(
                model, directory, task_config=record, extra_writers=[tokenizer.save]
            )
        else:
            save_task_model(model, directory, task_config=record, extra_writers=[tokenizer.save])

    if peft is not None:
        attach_peft(model, peft)
    return train_task(
        model,
        task,
        train,
        dev,
        trainer,
        save_final=save_final,
        seed=seed,
        num_workers=num_workers,
        group_by_length=group_by_length,
        peft=peft,
    )


def check_peft_run(
    task: TaskSpec,
    peft: PeftConfig,
    encoder: Any,
    base: str | Path | None,
    trainer: TrainerConfig,
    *,
    feature_based: bool,
) -> None:
    """Refuse, in one line naming the setting, what a parameter-efficient run cannot do."""
    where = f"task {task.name}: finetune.peft={peft.method}"
    if feature_based:
        raise ValueError(f"{where} and feature_based=true exclude each other; set one of them")
    if base is None:
        raise ValueError(
            f"{where} trains an adapter on a pre-trained model: give init_from=<its folder> "
            "(model=<a final/ or Hugging Face folder>), without finetune.random_init"
        )
    if trainer.unfreeze_every > 0:
        raise ValueError(
            f"{where}: trainer.unfreeze_every would unfreeze the frozen encoder; set it to 0"
        )


def load_finetuned(
    directory: str | Path,
) -> tuple[nn.Module, TaskTokenizer, TaskSpec, dict[str, Any]]:
    """Load a ``final/`` written by :func:`finetune`.

    Returns:
        ``(model, tokenizer, task, record)``: the model in eval mode, its tokenizer, the
        task it was trained on and the whole ``task.json``.
    """
    directory = Path(directory)
    record = read_task_json(directory / TASK_JSON)
    if "task" not in record:
        raise CheckpointError(
            f"{directory / TASK_JSON}: no 'task' settings; this folder was written by "
            "save_task_model, not by the finetune recipe. Load it with load_task_model"
        )
    model: nn.Module
    tokenizer = load_task_tokenizer(directory)
    if record.get("seq2seq"):  # BART/T5: classification head or text-to-text
        model = load_seq2seq_task(directory, record, tokenizer)
    elif record.get("feature_based"):
        from ptm_core.finetune.feature_based import load_feature_based_tagger

        model, _ = load_feature_based_tagger(directory)
    elif (directory / "compression.json").exists():  # `ptm compress` (int8/int4 included)
        from ptm_core.compress import load_compressed

        model = load_compressed(directory).model
    elif (extension_loader := task_loader(record)) is not None:  # e.g. ULMFiT (ptm-classic)
        model = extension_loader(directory)
    elif "peft" in record:  # adapter + head beside a pointer to the base model
        from ptm_core.finetune.peft_folder import load_peft_task_model

        model = load_peft_task_model(directory, record)
    else:
        model, _ = load_task_model(directory)
    return model.eval(), tokenizer, TaskSpec.from_mapping(record["task"]), record


def predict(
    directory: str | Path,
    path: str | Path | None = None,
    *,
    labelled: bool | None = None,
    device: str = "cpu",
) -> tuple[dict[str, float], Any]:
    """Predict with a fine-tuned model on a file of its task's format.

    Args:
        directory: the run's ``final/``.
        path: the file (default: the task's dev file).
        labelled: whether the file has labels; default: True for the dev file, else
            whether it does (a GLUE/SWAG file without a label column, a CoNLL file with
            one column, are read as unlabelled).
        device: where to run.

    Returns:
        ``(metrics, predictions)``: metrics are empty for an unlabelled file. Predictions:
        label names (classification; text-to-text: the generated text), values
        (regression), tag names per sentence (tagging), ending indices (multiple choice),
        ``{question id: answer}`` (qa).
    """
    model, tokenizer, task, record = load_finetuned(directory)
    model.to(device)
    names = record.get("label_names") or []
    target = path if path is not None else task.dev
    if labelled is None:
        labelled = path is None or _has_labels(task, Path(target))
    data = read_task(task, "dev", tokenizer, names or None, path=target, labelled=labelled)
    if record.get("seq2seq") == "text_to_text":  # the generated texts
        return evaluate_text_to_text(
            model,  # type: ignore[arg-type]
            task,
            data,
            device=torch.device(device),
            return_text=True,
        )
    metrics, predictions = evaluate_task(model, task, data, device=torch.device(device))
    if task.kind == "classification" and names:
        predictions = [names[i] for i in predictions]
    return metrics, predictions


def _has_labels(task: TaskSpec, path: Path) -> bool:
    """Whether a prediction file carries gold labels (its columns, or its column count)."""
    if task.format == "squad":
        return True  # SQuAD files without answers are read as unanswerable questions
    if task.format == "conll":
        with path.open(encoding="utf-8-sig") as handle:
            first = next(
                (line for line in handle if line.strip() and not line.startswith("-DOCSTART-")),
                "",
            )
        return len(first.split()) > 1
    if task.format == "swag":
        return "label" in swag_table(path).columns
    return task.label_field in TableFile(path).columns
