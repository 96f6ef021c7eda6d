"""Fine-tune and evaluate K-BERT (sentence classification or token tagging) with the core Trainer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ptm_core import TransformerEncoder
from ptm_core.atomic import atomic_write_text
from ptm_core.seeding import generator_for
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_knowledge.kbert.model import (
    KBertClassifier,
    KBertFeaturizer,
    KBertTagger,
    KGMode,
    VisibleMode,
)
from ptm_knowledge.kbert.tsv import (
    LabeledSentence,
    TaggedSentence,
    read_labeled_tsv,
    read_tagged_tsv,
)

HEAD_FILE = "kbert_head.safetensors"
KBERT_CONFIG = "kbert.json"


class FeaturizedBatches:
    """Deterministic, resumable batches of featurized examples (a core ``BatchSource``).

    Examples are featurized per batch when ``encode`` is given, so a large train set
    never exists as tensors all at once (a sentence tree's visible matrix alone is
    ``L * L`` bytes: 16 KiB at ``max_length=128``, 16 GB for a million sentences).

    Args:
        items: examples (e.g. the lazy sequence of :func:`read_labeled_tsv`) when
            ``encode`` is given, else outputs of :meth:`KBertFeaturizer.encode`.
        collate: :meth:`KBertFeaturizer.collate`.
        batch_size: rows per batch (the last, smaller batch is kept).
        seed: shuffling seed (per epoch); ``None`` keeps the order.
        encode: example -> :meth:`KBertFeaturizer.encode` output, applied per batch.
    """

    def __init__(
        self,
        items: Sequence[Any],
        collate: Any,
        batch_size: int,
        seed: int | None = 0,
        encode: Callable[[Any], Mapping[str, torch.Tensor]] | None = None,
    ) -> None:
        if not len(items):
            raise ValueError("no examples to batch")
        self.items = items
        self.collate = collate
        self.batch_size = batch_size
        self.seed = seed
        self.encode = encode

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.items) // self.batch_size)

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = list(range(len(self.items)))
        if self.seed is not None:
            order = torch.randperm(len(order), generator=generator_for(self.seed, epoch)).tolist()
        for b in range(start, self.batches_per_epoch):
            rows = order[b * self.batch_size : (b + 1) * self.batch_size]
            items = [self.items[i] for i in rows]
            yield self.collate([self.encode(x) for x in items] if self.encode else items)


@torch.no_grad()
def evaluate_kbert(
    model: KBertClassifier | KBertTagger, batches: FeaturizedBatches
) -> dict[str, float]:
    """Mean loss and accuracy over every batch (eval mode, model's device)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    records = []
    for batch in batches.iter_batches(0):
        out = model({k: v.to(device) for k, v in batch.items()})
        labels = batch["labels"]
        # Rows for classification, scored (non-branch, labelled) tokens for tagging.
        weight = float(labels.shape[0] if labels.dim() == 1 else (labels != -100).sum())
        records.append(({"loss": out.loss, **out.metrics}, weight))
    model.train(was_training)
    sums: dict[str, float] = {}
    total = sum(w for _, w in records)
    for metrics, w in records:
        for k, v in metrics.items():
            sums[k] = sums.get(k, 0.0) + float(v) * w
    return {k: v / total for k, v in sums.items()}


@dataclass
class KBertResult:
    """Where a fine-tuning run put its outputs (the recipe result contract)."""

    output_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    encoder_dir: Path
    final_metrics: dict[str, Any] = field(default_factory=dict)


def finetune_kbert(
    train: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    dev: Sequence[LabeledSentence] | Sequence[TaggedSentence],
    *,
    encoder: TransformerEncoder,
    tokenizer: Any,
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
) -> KBertResult:
    """Fine-tune a K-BERT sentence classifier (or tagger) and score it on ``dev``.

    :class:`LabeledSentence` examples train a :class:`KBertClassifier`,
    :class:`TaggedSentence` examples a :class:`KBertTagger` (branch tokens excluded).

    Writes ``<output_dir>/final/`` (encoder + tokenizer, ``kbert_head.safetensors``,
    ``kbert.json``) and ``<output_dir>/eval.json`` (dev metrics, prefixed ``dev/``).

    Args:
        train, dev: labelled sentences (:func:`read_labeled_tsv`) or tagged sentences
            (:func:`read_tagged_tsv`).
        encoder: the text encoder (a ``from_pretrained`` BERT keeps its weights).
        tokenizer: the encoder's WordPiece tokenizer.
        knowledge: subject -> objects (:func:`knowledge_from_graph`).
        label_names: class names in index order.
        trainer: core trainer settings (``output_dir``, ``max_steps``, ...).
        max_entities, max_length, kg, visible_matrix: see :class:`KBertFeaturizer`.
        batch_size: rows per optimizer step.
        dropout: classifier dropout.
        seed: batch order seed.
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
    )

    tagging = isinstance(train[0], TaggedSentence)

    def featurize(example: Any) -> dict[str, torch.Tensor]:
        if tagging:
            return featurizer.encode(example.words, word_labels=example.tags)
        return featurizer.encode(example.words, example.second, label=example.label)

    model: KBertClassifier | KBertTagger = (
        KBertTagger(encoder, len(label_names), dropout=dropout)
        if tagging
        else KBertClassifier(encoder, len(label_names), dropout=dropout)
    )
    config = {
        "task": "tagging" if tagging else "classification",
        "label_names": list(label_names),
        "max_entities": max_entities,
        "max_length": max_length,
        "kg": kg,
        "visible_matrix": visible_matrix,
    }

    def write_heads(directory: Path) -> None:
        heads = {
            name: t.detach().cpu().contiguous()
            for name, t in model.state_dict().items()
            if not name.startswith("encoder.")
        }
        save_file(heads, str(directory / HEAD_FILE))
        (directory / KBERT_CONFIG).write_text(json.dumps(config, indent=2) + "\n")

    # One atomic directory: encoder, tokenizer, heads and config appear together or not at all.
    run = train_and_save(
        model,
        FeaturizedBatches(train, featurizer.collate, batch_size, seed, encode=featurize),
        trainer,
        save_final=lambda final: model.encoder.save_pretrained(
            final, extra_writers=[tokenizer.save, write_heads]
        ),
    )
    result, final = run.result, run.final_dir
    dev_metrics = evaluate_kbert(
        model, FeaturizedBatches(dev, featurizer.collate, batch_size, None, encode=featurize)
    )
    final_metrics = {
        **(result.history[-1] if result.history else {}),
        **{f"dev/{k}": v for k, v in dev_metrics.items()},
    }
    atomic_write_text(result.output_dir / "eval.json", json.dumps(final_metrics, indent=2) + "\n")
    return KBertResult(
        output_dir=result.output_dir,
        metrics_path=result.metrics_path,
        last_checkpoint=result.last_checkpoint,
        encoder_dir=final,
        final_metrics=final_metrics,
    )


def load_kbert_classifier(
    directory: str | Path,
) -> tuple[KBertClassifier | KBertTagger, dict[str, Any]]:
    """Rebuild the classifier or tagger written by :func:`finetune_kbert` (``final/``).

    Returns:
        The model (eval mode) and the settings of ``kbert.json`` (``task``,
        ``label_names``, ``max_entities``, ``max_length``, ``kg``, ``visible_matrix``).
    """
    directory = Path(directory)
    config = json.loads((directory / KBERT_CONFIG).read_text(encoding="utf-8"))
    head = KBertTagger if config.get("task") == "tagging" else KBertClassifier
    model = head(TransformerEncoder.from_pretrained(directory), len(config["label_names"]))
    missing, unexpected = model.load_state_dict(load_file(directory / HEAD_FILE), strict=False)
    if unexpected or any(not m.startswith("encoder.") for m in missing):
        raise ValueError(
            f"{directory / HEAD_FILE}: head tensors do not match a {config.get('task')} head; "
            "was this final/ written by finetune_kbert?"
        )
    return model.eval(), config


__all__ = [
    "FeaturizedBatches",
    "KBertResult",
    "LabeledSentence",
    "TaggedSentence",
    "evaluate_kbert",
    "finetune_kbert",
    "load_kbert_classifier",
    "read_labeled_tsv",
    "read_tagged_tsv",
]
