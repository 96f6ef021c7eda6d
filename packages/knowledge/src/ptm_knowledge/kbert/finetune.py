"""Fine-tune, save, reload and score K-BERT on the core fine-tuning recipe's pieces.

K-BERT (Liu et al., 2020) fine-tunes like BERT; only its inputs differ. So the model is a
core :class:`~ptm_core.finetune.model.TaskModel` (a ``classification`` or ``tagging`` head
from :mod:`ptm_core.heads.tasks`) whose encoder receives the soft ``position_ids`` and the
``(B, L, L)`` visible matrix as ``attention_mask``; the batches are core
:class:`~ptm_core.finetune.data.task_batches.TaskBatches` over
:meth:`KBertFeaturizer.featurize`; ``final/`` is what
:func:`~ptm_core.finetune.model.save_task_model` writes (plus the tokenizer), with the
K-BERT settings in ``task.json``; dev metrics are the recipe's
(:func:`~ptm_core.finetune.scoring.evaluate_task`: accuracy/F1/MCC for classification,
seqeval entity F1 and word accuracy for tagging) in ``eval.json``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import torch
from safetensors.torch import load_file

from ptm_core import TransformerEncoder
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.init_report import report_init
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.model import (
    TASK_JSON,
    TaskModel,
    build_task_model,
    load_task_model,
    read_task_json,
    save_task_model,
)
from ptm_core.finetune.peft_folder import load_peft_task_model, save_peft_task_model
from ptm_core.finetune.scoring import FinetuneResult, evaluate_task, train_and_score
from ptm_core.finetune.task_data import TaskData
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig, attach_peft, count_trainable
from ptm_core.training import TrainerConfig
from ptm_knowledge.kbert.model import KBertFeaturizer, KGMode, VisibleMode
from ptm_knowledge.kbert.tsv import (
    LabeledSentence,
    TaggedSentence,
    read_labeled_tsv,
    read_tagged_tsv,
)

logger = logging.getLogger(__name__)

RECIPE = "kbert"
# The K-BERT settings task.json keeps (KBertFeaturizer's arguments).
SETTINGS = ("max_entities", "max_length", "kg", "visible_matrix")
# What finetune_kbert wrote before it joined the core recipe (still loaded).
LEGACY_HEAD_FILE = "kbert_head.safetensors"
LEGACY_CONFIG = "kbert.json"

# The result of a run: the core recipe's (output_dir, metrics_path, last_checkpoint,
# encoder_dir = final/, final_metrics).
KBertResult = FinetuneResult


def kbert_task(
    kind: str, train: Sequence[Any], dev: Sequence[Any], eval_batch_size: int = 64
) -> TaskSpec:
    """The :class:`~ptm_core.finetune.task_spec.TaskSpec` that scores K-BERT rows.

    Only ``kind``, the metric and ``eval_batch_size`` matter to
    :func:`~ptm_core.finetune.scoring.evaluate_task`; the file names (a lazy TSV's ``path``)
    are recorded for the reader of a run.
    """
    return TaskSpec(
        name=RECIPE,
        kind=kind,
        train=str(getattr(train, "path", "<memory>")),
        dev=str(getattr(dev, "path", "<memory>")),
        eval_batch_size=eval_batch_size,
    )


def evaluate_kbert(
    model: TaskModel,
    rows: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    featurizer: KBertFeaturizer,
    label_names: Sequence[str],
    *,
    batch_size: int = 64,
    device: torch.device | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Score ``model`` on labelled K-BERT rows with the fine-tuning recipe's metrics.

    Args:
        model: a K-BERT :class:`TaskModel` (classification or tagging).
        rows: labelled or tagged sentences.
        featurizer: the settings the model was trained with.
        label_names: class or tag names in index order.
        batch_size: rows per evaluation batch.
        device: where to run (default: the model's).

    Returns:
        ``(metrics, predictions)``: classification ``accuracy``, ``f1``, ``f1_macro``,
        ``matthews_corrcoef``; tagging seqeval ``precision``/``recall``/``f1`` and word
        ``accuracy`` (branch tokens never count); both with ``loss``. Predictions are
        class indices, or one tag name per word (first trunk piece) per sentence.
    """
    task = kbert_task(model.kind, rows, rows, batch_size)
    data = TaskData(rows, rows, featurizer, list(label_names))
    return evaluate_task(model, task, data, device=device)


def finetune_kbert(
    train: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    dev: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    *,
    encoder: TransformerEncoder,
    tokenizer: TaskTokenizer,
    knowledge: Mapping[str, Sequence[str]],
    label_names: Sequence[str],
    trainer: TrainerConfig,
    max_entities: int = 2,
    max_length: int = 128,
    batch_size: int = 16,
    kg: KGMode = "full",
    visible_matrix: VisibleMode = "on",
    dropout: float = 0.1,
    seed: int = 0,
    num_workers: int = 0,
    init_from: str | Path | None = None,
    provenance: Mapping[str, Any] | None = None,
    peft: PeftConfig | None = None,
) -> FinetuneResult:
    """Fine-tune a K-BERT sentence classifier (or tagger) and score it on ``dev``.

    :class:`LabeledSentence` examples train a ``classification`` :class:`TaskModel` (pooled
    ``[CLS]``), :class:`TaggedSentence` examples a ``tagging`` one (branch tokens carry no
    label). Batches are :class:`TaskBatches` (deterministic by ``(seed, epoch)``, resumable
    mid-epoch), featurized per batch.

    Writes ``<output_dir>/final/`` (:func:`save_task_model`: encoder,
    ``task_head.safetensors``, ``task.json`` with ``recipe: "kbert"`` and
    ``max_entities``, ``max_length``, ``kg``, ``visible_matrix``; plus the tokenizer) and
    ``<output_dir>/eval.json`` (last training metrics and dev metrics, prefixed ``dev/``).

    Args:
        train, dev: labelled sentences (:func:`read_labeled_tsv`) or tagged sentences
            (:func:`read_tagged_tsv`).
        encoder: the text encoder (a ``from_pretrained`` BERT keeps its weights).
        tokenizer: the encoder's tokenizer (WordPiece, or a RoBERTa/XLM-R folder's).
        knowledge: subject -> objects (:func:`knowledge_from_graph`).
        label_names: class or tag names in index order.
        trainer: core trainer settings (``output_dir``, ``max_steps``, ...).
        max_entities, max_length, kg, visible_matrix: see :class:`KBertFeaturizer`.
        batch_size: rows per optimizer step.
        dropout: head dropout.
        seed: batch order seed.
        num_workers: processes that featurize training batches.
        init_from: the folder ``encoder`` was loaded from; the log says which tensors
            came from it and which start fresh (the task head).
        provenance: JSON-ready facts kept in ``task.json`` (the KG's path, the data files).
        peft: a parameter-efficient method on the encoder (needs ``init_from``): only the
            adapter and the head train, and ``final/`` holds just those beside a pointer to
            ``init_from`` (:mod:`ptm_core.finetune.peft_folder`).

    Returns:
        :class:`KBertResult` (the recipe's ``FinetuneResult``).
    """
    for name, examples in (("train", train), ("dev", dev)):
        if not examples:
            raise ValueError(f"finetune_kbert: no {name} examples; give a non-empty {name} set")
    featurizer = KBertFeaturizer(
        tokenizer,
        knowledge,
        max_entities=max_entities,
        max_length=max_length,
        kg=kg,
        visible_matrix=visible_matrix,
        structured_mask=trainer.structured_masks,
    )
    kind = "tagging" if isinstance(train[0], TaggedSentence) else "classification"
    model = build_task_model(encoder, kind, len(label_names), dropout, label_names=label_names)
    if init_from is not None:
        report_init(model, init_from, [encoder], what="kbert.init_from")
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None:
        if init_from is None:
            raise ValueError(f"kbert.peft={peft.method} needs kbert.init_from (the base model)")
        attach_peft(model, peft)
    trainable = count_trainable(model)
    logger.info("kbert: %s%s", trainable.describe(), f" ({peft.method})" if peft else "")
    settings = {
        "recipe": RECIPE,
        "max_entities": max_entities,
        "max_length": max_length,
        "kg": kg,
        "visible_matrix": visible_matrix,
        **({"provenance": dict(provenance)} if provenance else {}),
    }

    def save_final(final: Path) -> None:
        if peft is not None:
            save_peft_task_model(
                model, final, config=peft, base=cast(Path, init_from), task_config=settings,
                extra_writers=[tokenizer.save],
            )  # fmt: skip
        else:
            save_task_model(model, final, task_config=settings, extra_writers=[tokenizer.save])

    batches = TaskBatches(train, featurizer, batch_size, seed=seed, num_workers=num_workers)
    return train_and_score(
        model,
        batches,
        trainer,
        save_final=save_final,
        score=lambda: evaluate_kbert(model, dev, featurizer, label_names),
        name="kbert",
        metric="f1" if kind == "tagging" else "accuracy",
        facts=trainable.facts(),
    )


def load_kbert_classifier(directory: str | Path) -> tuple[TaskModel, dict[str, Any]]:
    """Load the classifier or tagger :func:`finetune_kbert` wrote (``final/``).

    A thin wrapper on :func:`~ptm_core.finetune.model.load_task_model`. A ``final/`` from
    before K-BERT joined the core recipe (``kbert_head.safetensors`` + ``kbert.json``) is
    still read: its head tensors have the core heads' names.

    Args:
        directory: the run's ``final/``.

    Returns:
        The :class:`TaskModel` (eval mode) and its settings: ``kind``, ``num_labels``,
        ``label_names``, ``dropout``, ``pool``, ``max_entities``, ``max_length``, ``kg``,
        ``visible_matrix`` (and ``provenance`` when the run recorded it).

    Raises:
        CheckpointError: a missing or mismatched file, named with the fix.
    """
    directory = Path(directory)
    if not (directory / TASK_JSON).exists() and (directory / LEGACY_CONFIG).exists():
        return _load_legacy(directory)
    config = read_task_json(directory / TASK_JSON)
    if config.get("recipe") == RECIPE and "peft" in config:  # adapter + pointer to the base
        model = load_peft_task_model(directory, config)
    else:
        model, config = load_task_model(directory)
    if config.get("recipe") != RECIPE:
        raise CheckpointError(
            f"{directory / TASK_JSON}: recipe is {config.get('recipe')!r}, not 'kbert'; this "
            "final/ was not written by finetune_kbert (load it with "
            "ptm_core.finetune.recipe.load_finetuned)"
        )
    return model.eval(), config


def _load_legacy(directory: Path) -> tuple[TaskModel, dict[str, Any]]:
    """A ``final/`` of the old ``finetune_kbert`` (``kbert.json`` + ``kbert_head.safetensors``)."""
    path = directory / LEGACY_CONFIG
    old = json.loads(path.read_text(encoding="utf-8"))
    kind = "tagging" if old.get("task") == "tagging" else "classification"
    names = old.get("label_names")
    if not isinstance(names, list):
        raise CheckpointError(f"{path}: label_names must be a list; re-run finetune_kbert")
    model = build_task_model(
        TransformerEncoder.from_pretrained(directory), kind, len(names), label_names=names
    )
    head_path = directory / LEGACY_HEAD_FILE
    try:
        model.head.load_state_dict(load_file(str(head_path)))
    except (FileNotFoundError, RuntimeError) as exc:
        raise CheckpointError(
            f"{head_path}: does not hold a {kind} head for {len(names)} labels "
            f"({' '.join(str(exc).split())}); "
            "fine-tune again with finetune_kbert (ptm pretrain experiment=kbert_tiny_cls)"
        ) from None
    config: dict[str, Any] = {
        "recipe": RECIPE,
        "kind": kind,
        "num_labels": len(names),
        "label_names": names,
        **{k: old[k] for k in SETTINGS if k in old},
    }
    return model.eval(), config


def featurizer_for(
    config: Mapping[str, Any], tokenizer: TaskTokenizer, knowledge: Mapping[str, Sequence[str]]
) -> KBertFeaturizer:
    """The :class:`KBertFeaturizer` a saved model was trained with (its ``task.json``)."""
    return KBertFeaturizer(
        tokenizer,
        knowledge,
        max_entities=int(config.get("max_entities", 2)),
        max_length=int(config.get("max_length", 128)),
        kg=config.get("kg", "full"),
        visible_matrix=config.get("visible_matrix", "on"),
    )


def predict_kbert(
    directory: str | Path,
    rows: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    knowledge: Mapping[str, Sequence[str]],
    *,
    batch_size: int = 64,
    device: str = "cpu",
    reinitialise: Callable[[torch.nn.Module], None] | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Predict with a K-BERT ``final/`` on labelled rows, with its saved settings.

    Args:
        directory: the run's ``final/`` (model, tokenizer, ``task.json``).
        rows: sentences read with the model's label names
            (``read_labeled_tsv(path, config["label_names"])``).
        knowledge: the KG table the model was trained with (:func:`knowledge_from_graph`).
        batch_size: rows per batch.
        device: where to run.
        reinitialise: applied to the loaded model first (``ptm evaluate``'s random-init
            baseline: the same architecture and settings without the trained weights).

    Returns:
        ``(metrics, predictions)`` as :func:`evaluate_kbert`, with class names instead of
        indices for classification.
    """
    model, config = load_kbert_classifier(directory)
    if reinitialise is not None:
        reinitialise(model)
    model.to(device)
    tokenizer = load_task_tokenizer(directory)
    names = list(config["label_names"])
    metrics, predictions = evaluate_kbert(
        model,
        rows,
        featurizer_for(config, tokenizer, knowledge),
        names,
        batch_size=batch_size,
        device=torch.device(device),
    )
    if model.kind == "classification":
        predictions = [names[i] for i in predictions]
    return metrics, predictions


def score_kbert_final(
    directory: str | Path,
    path: str | Path | None = None,
    *,
    device: str = "cpu",
    reinitialise: Callable[[torch.nn.Module], None] | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Score a K-BERT ``final/`` on its dev file (or ``path``) with nothing but the folder.

    The run's ``task.json`` ``provenance`` (written by ``recipe: kbert``) names the KG
    (``kg_path``, ``predicate``, ``aliases``) and the dev file; the file is read with the
    model's label names (TSV ``label<TAB>text_a[<TAB>text_b]``, or ``word<TAB>tag`` for a
    tagger).

    Returns:
        ``(metrics, predictions)`` as :func:`predict_kbert`.

    Raises:
        CheckpointError: ``task.json`` lacks the provenance (a run of :func:`finetune_kbert`
            called without it): use :func:`predict_kbert` with the KG instead.
    """
    from ptm_knowledge.kbert.knowledge import knowledge_from_graph
    from ptm_knowledge.kg import load_knowledge_graph

    _, config = load_kbert_classifier(directory)
    provenance = config.get("provenance") or {}
    target = path if path is not None else provenance.get("dev")
    if not provenance.get("kg_path") or not target:
        raise CheckpointError(
            f"{Path(directory) / TASK_JSON}: no provenance.kg_path / provenance.dev; this run "
            "did not record its KG and data. Call predict_kbert(directory, rows, knowledge) "
            "with the KG it was trained with"
        )
    knowledge = knowledge_from_graph(
        load_knowledge_graph(provenance["kg_path"]),
        predicate=bool(provenance.get("predicate", True)),
        aliases=bool(provenance.get("aliases", False)),
    )
    read = read_tagged_tsv if config["kind"] == "tagging" else read_labeled_tsv
    rows, _ = read(target, config["label_names"])
    return predict_kbert(directory, rows, knowledge, device=device, reinitialise=reinitialise)


__all__ = [
    "KBertResult",
    "LabeledSentence",
    "TaggedSentence",
    "evaluate_kbert",
    "featurizer_for",
    "finetune_kbert",
    "kbert_task",
    "load_kbert_classifier",
    "predict_kbert",
    "read_labeled_tsv",
    "read_tagged_tsv",
    "score_kbert_final",
]
