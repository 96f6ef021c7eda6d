"""Scoring a fine-tuned model on a task, and the tail every fine-tuning run shares.

:func:`evaluate_task` scores a model on a :class:`~ptm_core.finetune.task_data.TaskData`
with the task's metrics; :func:`train_and_score` trains (resume, bf16, DDP: the core
Trainer), scores the dev set and writes ``eval.json``; :func:`train_task` is the core
recipes' run of a built model on a read task (batches, that tail);
:class:`FinetuneResult` is what a run returns.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ptm_core.atomic import atomic_write_text
from ptm_core.finetune.collapse import collapse_warnings, prior_loss
from ptm_core.finetune.data.features import aligned_tags
from ptm_core.finetune.data.qa import postprocess_qa, squad_references
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.label_scores import LABELS_FILE, LabelledPredictions, label_scores
from ptm_core.finetune.metrics import compute_metrics
from ptm_core.finetune.task_data import TaskData
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig, count_trainable
from ptm_core.progress import Progress
from ptm_core.training import TrainerConfig
from ptm_core.training.distributed import is_main_process
from ptm_core.training.loggers import log_after_training
from ptm_core.training.metrics import MetricsLog
from ptm_core.training.run import train_and_save

EVAL_FILE = "eval.json"
logger = logging.getLogger(__name__)


@torch.no_grad()
def evaluate_task(
    model: nn.Module, task: TaskSpec, data: TaskData, *, device: torch.device | None = None
) -> tuple[dict[str, float], Any]:
    """Score ``model`` on ``data`` with the task's metrics.

    Returns:
        ``(metrics, predictions)``: the metrics of
        :func:`~ptm_core.finetune.metrics.compute_metrics` plus ``loss`` (mean over batches,
        when the data has labels); predictions are class indices, values, tag names per
        sentence, or ``{question id: answer}``; for labelled classification and tagging
        data a :class:`~ptm_core.finetune.label_scores.LabelledPredictions` (the same
        list, with the gold labels). A text-to-text model (T5) is scored by
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
    progress = Progress("score", len(batches), "batch")
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
        progress.update()
    progress.close()
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
        result = (
            LabelledPredictions(predicted, gold, data.label_names, task.kind)
            if task.kind in ("classification", "tagging") and data.label_names
            else predicted
        )
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


def train_and_score(
    model: nn.Module,
    data: Any,
    trainer: TrainerConfig,
    *,
    save_final: Callable[[Path], object],
    score: Callable[[], dict[str, float] | tuple[dict[str, float], Any]],
    name: str,
    metric: str | None = None,
    facts: dict[str, Any] | None = None,
) -> FinetuneResult:
    """The tail of every fine-tuning run: train (:func:`train_and_save`: resume, rank 0
    writes ``final/``), score the dev set with ``score()``, write ``eval.json`` atomically
    (the last training metrics and ``dev/<name>`` for each dev metric), print the headline.
    Labelled classification and tagging predictions also get ``dev_labels.json``: the
    confusion matrix and per-label scores (:func:`~ptm_core.finetune.label_scores.label_scores`).

    ``score()`` returns the dev metrics, or ``(metrics, predictions)`` as
    :func:`evaluate_task` does. A collapsed run (a training loss that ends at the label
    prior's, or dev predictions of one class: :mod:`ptm_core.finetune.collapse`) is warned
    about in the log, on the terminal and under ``warnings`` in ``eval.json`` and the
    result's ``final_metrics``. ``facts`` (the trainable-parameter count) join them.
    """
    run = train_and_save(model, data, trainer, save_final=save_final)
    scored = score()
    dev_metrics, predictions = scored if isinstance(scored, tuple) else (scored, None)
    final_metrics: dict[str, Any] = {
        **run.final_metrics,
        **{f"dev/{key}": value for key, value in dev_metrics.items()},
        **(facts or {}),
    }
    rows = getattr(data, "rows", None)
    warnings = collapse_warnings(
        MetricsLog(run.result.metrics_path).read(),
        prior_loss(rows) if rows is not None else None,
        predictions,
        label_names=getattr(model, "label_names", None),
    )
    if warnings:
        final_metrics["warnings"] = warnings
    output_dir = run.result.output_dir
    if trainer.loggers and is_main_process():  # the dev curve point beside the training ones
        log_after_training(
            trainer, run.result.final_step, {f"dev/{k}": v for k, v in dev_metrics.items()}
        )
    atomic_write_text(output_dir / EVAL_FILE, json.dumps(final_metrics, indent=2) + "\n")
    if isinstance(predictions, LabelledPredictions):
        scores = label_scores(predictions)
        atomic_write_text(output_dir / LABELS_FILE, json.dumps(scores) + "\n")
    headline = f"dev/{metric} {dev_metrics.get(metric, float('nan')):.4f} " if metric else ""
    print(
        f"{name}: {headline}({', '.join(f'{k} {v:.4f}' for k, v in sorted(dev_metrics.items()))})"
    )
    for warning in warnings:
        logger.warning("%s: %s", name, warning)
        print(f"warning: {warning}")
    return FinetuneResult(
        output_dir=output_dir,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        encoder_dir=run.final_dir,
        final_metrics=final_metrics,
    )


def train_task(
    model: nn.Module,
    task: TaskSpec,
    train: TaskData,
    dev: TaskData,
    trainer: TrainerConfig,
    *,
    save_final: Callable[[Path], object],
    seed: int = 0,
    num_workers: int = 0,
    group_by_length: bool = True,
    featurizer: Any = None,
    peft: PeftConfig | None = None,
    print_trainable: bool = False,
) -> FinetuneResult:
    """Train a built task model on ``train`` and score it on ``dev`` (the core recipes' run).

    Logs the trainable parameters, batches ``train``'s rows
    (:class:`~ptm_core.finetune.data.task_batches.TaskBatches`, ``task.batch_size``) and runs
    :func:`train_and_score` with :func:`evaluate_task` on ``dev``, the task's metric as the
    headline and the trainable-parameter facts in ``eval.json``.

    Args:
        model: the task model (the head on the encoder).
        task: the task (batch size, metric, name).
        train: the training data (its rows; its featurizer unless ``featurizer`` is given).
        dev: the data scored after training.
        trainer: core trainer settings.
        save_final: writes ``final/`` (rank 0, after training).
        seed: batch order seed.
        num_workers: DataLoader processes that featurize training batches.
        group_by_length: batch rows of similar length together.
        featurizer: turns ``train``'s rows into batches instead of ``train.featurizer``
            (T5's text-to-text mode).
        peft: the parameter-efficient method the caller attached (named in the log line),
            or None (everything trains).
        print_trainable: print the trainable-parameter line instead of logging it (the
            families whose fine-tunes print it: ERNIE-THU, ULMFiT).
    """
    trainable = count_trainable(model)
    line = f"{task.name}: {trainable.describe()}{f' ({peft.method})' if peft else ''}"
    if print_trainable:
        print(line)
    else:
        logger.info("%s", line)
    data = TaskBatches(
        train.rows,
        featurizer if featurizer is not None else train.featurizer,
        task.batch_size,
        seed=seed,
        num_workers=num_workers,
        group_by_length=group_by_length,
    )
    return train_and_score(
        model,
        data,
        trainer,
        save_final=save_final,
        score=lambda: evaluate_task(model, task, dev),
        name=task.name,
        metric=str(task.metric),
        facts=trainable.facts(),
    )
