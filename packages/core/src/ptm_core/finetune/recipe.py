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

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

from ptm_core.atomic import atomic_write_text
from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.conll import read_conll
from ptm_core.finetune.data.features import (
    ChoiceFeaturizer,
    SentenceFeaturizer,
    TaggingFeaturizer,
    aligned_tags,
)
from ptm_core.finetune.data.glue import read_glue
from ptm_core.finetune.data.qa import QAFeaturizer, postprocess_qa, squad_references
from ptm_core.finetune.data.squad import read_squad
from ptm_core.finetune.data.swag import read_swag
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.model import (
    TASK_JSON,
    build_task_model,
    load_task_model,
    read_task_json,
    save_task_model,
)
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save

EVAL_FILE = "eval.json"


@dataclass
class TaskData:
    """A task's examples, and how they become batches.

    Attributes:
        examples: the file's examples (a lazy sequence).
        rows: what is batched: the examples, or QA windows.
        featurizer: rows -> batch.
        label_names: class or tag names (empty for regression, QA, multiple choice).
        labelled: whether the examples carry gold labels (False: prediction only).
    """

    examples: Sequence[Any]
    rows: Sequence[Any]
    featurizer: Any
    label_names: list[str]
    labelled: bool = True


def read_task(
    task: TaskSpec,
    split: str,
    tokenizer: TaskTokenizer,
    label_names: Sequence[str] | None = None,
    *,
    path: str | Path | None = None,
    labelled: bool = True,
) -> TaskData:
    """Read ``task.<split>`` (``train`` or ``dev``), or ``path``, and build its featurizer.

    Args:
        task: the task.
        split: ``"train"`` or ``"dev"``.
        tokenizer: the model's tokenizer.
        label_names: the train set's labels (dev is read against them: an unseen label
            is an error naming the file and line).
        path: another file of the task's format (prediction), instead of the split's.
        labelled: False for a file to predict on (GLUE/SWAG without a ``label`` column,
            CoNLL without a tag column).
    """
    path = path if path is not None else getattr(task, split)
    names = list(label_names) if label_names is not None else None
    featurizer: Any
    if task.format == "glue":
        kind: Literal["classification", "regression"] = (
            "regression" if task.kind == "regression" else "classification"
        )
        examples: Sequence[Any] = read_glue(
            path,
            kind=kind,
            text_fields=task.text_fields,
            label_field=task.label_field,
            label_names=names,
            require_labels=labelled,
        )
        featurizer = SentenceFeaturizer(tokenizer, task.max_length, kind=kind)
        return TaskData(examples, examples, featurizer, list(examples.label_names))  # type: ignore[attr-defined]
    if task.format == "conll":
        records = read_conll(path, label_names=names, tag_column=-1 if labelled else None)
        featurizer = TaggingFeaturizer(tokenizer, task.max_length)
        if not labelled:  # tag 0 everywhere marks each word's first piece; never scored
            rows = [dataclasses.replace(e, tags=[0] * len(e.words)) for e in records]
            return TaskData(rows, rows, featurizer, list(names or []), labelled=False)
        return TaskData(records, records, featurizer, list(records.label_names))
    if task.format == "swag":
        examples = read_swag(path, require_labels=labelled)
        featurizer = ChoiceFeaturizer(tokenizer, task.max_length)
        return TaskData(examples, examples, featurizer, [], labelled=labelled)
    examples = read_squad(path)
    qa = QAFeaturizer(
        tokenizer,
        task.max_length,
        task.doc_stride,
        max_query_length=min(64, task.max_length - task.doc_stride - 4),
    )
    return TaskData(examples, qa.windows(examples), qa, [])


def _num_labels(task: TaskSpec, train: TaskData) -> int:
    if task.kind == "regression":
        return 1
    if task.kind in ("qa", "multiple_choice"):
        return 2 if task.kind == "qa" else len(train.examples[0].endings)
    if len(train.label_names) < (2 if task.kind == "classification" else 1):
        raise ValueError(
            f"{task.train}: {task.kind} needs at least two labels, the file has "
            f"{train.label_names}; check task.label_field"
        )
    return len(train.label_names)


@torch.no_grad()
def evaluate_task(
    model: nn.Module, task: TaskSpec, data: TaskData, *, device: torch.device | None = None
) -> tuple[dict[str, float], Any]:
    """Score ``model`` on ``data`` with the task's metrics.

    Returns:
        ``(metrics, predictions)``: the metrics of
        :func:`~ptm_core.finetune.metrics.compute_metrics` plus ``loss`` (mean over batches,
        when the data has labels); predictions are class indices, values, tag names per
        sentence, or ``{question id: answer}``. A text-to-text model (T5) is scored by
        greedy generation (:func:`~ptm_core.finetune.text_to_text.evaluate_text_to_text`).
    """
    from ptm_core.finetune.text_to_text import TextToTextModel, evaluate_text_to_text

    if isinstance(model, TextToTextModel):
        return evaluate_text_to_text(model, task, data, device=device)
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    batches = TaskBatches(
        data.rows,
        data.featurizer,
        task.eval_batch_size,
        shuffle=False,
        feature_index=task.kind == "qa",
    )
    losses: list[float] = []
    gold: list[Any] = []
    predicted: list[Any] = []
    starts: list[torch.Tensor] = []
    ends: list[torch.Tensor] = []
    for batch in batches.iter_batches(0):
        output = model({k: v.to(device) for k, v in batch.items()})
        if output.loss is not None:
            losses.append(float(output.loss))
        logits = output.logits.float().cpu()
        if task.kind == "qa":
            starts.extend(logits[..., 0])
            ends.extend(logits[..., 1])
        elif task.kind == "tagging":
            tags = getattr(output, "predictions", None)
            prediction = tags.cpu() if tags is not None else logits.argmax(-1)
            references, names = aligned_tags(batch["labels"], prediction, data.label_names)
            gold.extend(references)
            predicted.extend(names)
        elif task.kind == "regression":
            predicted.extend(logits.squeeze(-1).tolist())
        else:
            predicted.extend(logits.argmax(-1).tolist())
        if task.kind in ("classification", "regression", "multiple_choice") and "labels" in batch:
            gold.extend(batch["labels"].tolist())
    model.train(was_training)
    if task.kind == "qa":
        answers = postprocess_qa(
            data.rows,  # type: ignore[arg-type]
            starts,
            ends,
            n_best=task.n_best,
            max_answer_length=task.max_answer_length,
            null_threshold=task.null_threshold,
            version_2=bool(getattr(data.examples, "version_2", False)),
        )
        metrics = compute_metrics("qa", answers, squad_references(data.examples))
        result: Any = answers
    elif data.labelled and gold:
        metrics = compute_metrics(
            task.kind,
            predicted,
            gold,
            num_labels=len(data.label_names) if task.kind == "classification" else None,
        )
        result = predicted
    else:
        metrics, result = {}, predicted
    if losses and data.labelled:
        metrics["loss"] = sum(losses) / len(losses)
    return metrics, result


@dataclass
class FinetuneResult:
    """Where a fine-tuning run put its outputs (the recipe result contract).

    Attributes:
        output_dir: the run directory.
        metrics_path: its ``metrics.jsonl``.
        last_checkpoint: the newest checkpoint.
        encoder_dir: ``final/``: the fine-tuned model (:func:`load_finetuned` reads it).
        final_metrics: the last training metrics and the dev metrics (``dev/<name>``).
    """

    output_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    encoder_dir: Path
    final_metrics: dict[str, Any] = field(default_factory=dict)


def finetune(
    task: TaskSpec,
    *,
    encoder: TransformerEncoder | EncoderDecoderModel,
    tokenizer: TaskTokenizer,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    feature_based: bool = False,
    text_to_text: bool = False,
    lstm_hidden: int = 128,
    num_workers: int = 0,
    provenance: dict[str, Any] | None = None,
) -> FinetuneResult:
    """Fine-tune ``encoder`` on ``task`` and score the result on the task's dev set.

    Args:
        task: the task (kind, files, lengths, metric).
        encoder: the pre-trained encoder (or a random one, for the baseline); an
            encoder-decoder (BART/T5) runs :func:`~ptm_core.finetune.seq2seq.finetune_seq2seq`.
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
        provenance: JSON-ready facts to record in ``task.json`` (``init_from``, ...).

    Returns:
        :class:`FinetuneResult`; ``<output_dir>/final/`` holds the model, its tokenizer
        and ``task.json``, ``<output_dir>/eval.json`` the dev metrics.
    """
    # The new head's initial weights come from the global RNG: seed it from the run's seed,
    # so the same seed gives the same run in any process (the trainer seeds only later).
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    if isinstance(encoder, EncoderDecoderModel) and not feature_based:
        from ptm_core.finetune.seq2seq import finetune_seq2seq

        return finetune_seq2seq(
            task,
            model=encoder,
            tokenizer=tokenizer,
            trainer=trainer,
            seed=seed,
            dropout=dropout,
            text_to_text=text_to_text,
            num_workers=num_workers,
            provenance=provenance,
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
    num_labels = _num_labels(task, train)
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
    else:
        model = build_task_model(
            encoder,
            task.kind,
            num_labels,
            dropout,
            label_names=train.label_names or None,
        )
    record = {
        "task": task.to_dict(),
        "feature_based": feature_based,
        **({"provenance": provenance} if provenance else {}),
    }

    def save_final(directory: Path) -> None:
        if feature_based:
            from ptm_core.finetune.feature_based import save_feature_based_tagger

            save_feature_based_tagger(
                model, directory, task_config=record, extra_writers=[tokenizer.save]
            )
        else:
            save_task_model(model, directory, task_config=record, extra_writers=[tokenizer.save])

    data = TaskBatches(
        train.rows, train.featurizer, task.batch_size, seed=seed, num_workers=num_workers
    )
    return train_and_score(
        model,
        data,
        trainer,
        save_final=save_final,
        score=lambda: evaluate_task(model, task, dev)[0],
        name=task.name,
        metric=str(task.metric),
    )


def train_and_score(
    model: nn.Module,
    data: Any,
    trainer: TrainerConfig,
    *,
    save_final: Callable[[Path], object],
    score: Callable[[], dict[str, float]],
    name: str,
    metric: str | None = None,
) -> FinetuneResult:
    """The tail of every fine-tuning run: train (:func:`train_and_save`: resume, rank 0
    writes ``final/``), score the dev set with ``score()``, write ``eval.json`` atomically
    (the last training metrics and ``dev/<name>`` for each dev metric), print the headline.
    """
    run = train_and_save(model, data, trainer, save_final=save_final)
    dev_metrics = score()
    final_metrics = {
        **run.final_metrics,
        **{f"dev/{key}": value for key, value in dev_metrics.items()},
    }
    output_dir = run.result.output_dir
    atomic_write_text(output_dir / EVAL_FILE, json.dumps(final_metrics, indent=2) + "\n")
    headline = f"dev/{metric} {dev_metrics.get(metric, float('nan')):.4f} " if metric else ""
    print(
        f"{name}: {headline}({', '.join(f'{k} {v:.4f}' for k, v in sorted(dev_metrics.items()))})"
    )
    return FinetuneResult(
        output_dir=output_dir,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        encoder_dir=run.final_dir,
        final_metrics=final_metrics,
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
        from ptm_core.finetune.seq2seq import load_seq2seq_task

        model = load_seq2seq_task(directory, record, tokenizer)
    elif record.get("feature_based"):
        from ptm_core.finetune.feature_based import load_feature_based_tagger

        model, _ = load_feature_based_tagger(directory)
    elif (directory / "compression.json").exists():  # `ptm compress` (int8/int4 included)
        from ptm_core.compress import load_compressed

        model = load_compressed(directory).model
    elif record.get("ulmfit"):  # ULMFiT's classifier over an AWD-LSTM
        from ptm_core.recurrent.ulmfit import load_ulmfit_classifier

        model = load_ulmfit_classifier(directory)
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
        from ptm_core.finetune.text_to_text import evaluate_text_to_text

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
    """Whether a prediction file carries gold labels (its header, or its column count)."""
    if task.format == "squad":
        return True  # SQuAD files without answers are read as unanswerable questions
    with path.open(encoding="utf-8-sig") as handle:
        first = next(
            (line for line in handle if line.strip() and not line.startswith("-DOCSTART-")), ""
        )
    if task.format == "conll":
        return len(first.split()) > 1
    if task.format == "swag":
        return "label" in first.rstrip("\n").split(",")
    if path.suffix in (".jsonl", ".json", ".ndjson"):
        return f'"{task.label_field}"' in first
    return task.label_field in first.rstrip("\n").split("\t")
