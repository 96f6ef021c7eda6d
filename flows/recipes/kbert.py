"""K-BERT fine-tuning from a composed config: ``recipe: kbert``.

Reads the labelled TSVs and the KG named by ``data`` (``configs/data/kbert_sample.yaml``),
builds the encoder (``cfg.model``, or ``kbert.init_from``: any checkpoint
``TransformerEncoder.from_pretrained`` loads, used without re-pre-training) and fine-tunes
a K-BERT classifier (a core ``TaskModel`` on core ``TaskBatches``, see
:func:`~ptm_knowledge.kbert.finetune_kbert`) with the ablations of ``kbert.kg`` /
``kbert.visible_matrix``; ``final/`` is a core fine-tuned model folder (``task.json`` with
``recipe: kbert``, the K-BERT settings and where the KG and data came from).
The TSVs are validated in one streaming pass and read per row (byte offsets), examples are
featurized per batch, and the KG's facts are held in a compact
:class:`~ptm_knowledge.kbert.KBertKnowledge` index rather than a dict of strings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_core import TransformerEncoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.kbert import KBertResult, finetune_kbert, knowledge_from_graph, read_labeled_tsv
from ptm_knowledge.kg import load_knowledge_graph


def _switch(value: Any, on: str, off: str) -> str:
    """YAML/CLI may give booleans for on/off switches."""
    if isinstance(value, bool):
        return on if value else off
    return str(value)


def run(cfg: DictConfig, **trainer_overrides: Any) -> KBertResult:
    """Fine-tune K-BERT as configured.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``kbert_sample.yaml``, ``objective`` as ``kbert_cls.yaml``, a ``kbert`` block as
            in ``experiment/kbert_tiny_cls.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data, options, objective = cfg.data, cfg.kbert, cfg.objective
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    init_from = options.get("init_from")
    if init_from:
        tokenizer = WordPieceTokenizer.from_directory(init_from)
        encoder = TransformerEncoder.from_pretrained(init_from)
    else:
        path = Path(data.tokenizer)
        tokenizer = (
            WordPieceTokenizer.from_vocab(path, lowercase=data.lowercase)
            if path.is_file()
            else WordPieceTokenizer.from_directory(path)
        )
        encoder = instantiate(cfg.model)(vocab_size=tokenizer.vocab_size)
    train, labels = read_labeled_tsv(data.corpus)
    dev, _ = read_labeled_tsv(data.dev, labels)
    predicate, aliases = bool(data.get("predicate", True)), bool(data.get("aliases", False))
    knowledge = knowledge_from_graph(
        load_knowledge_graph(data.kg), predicate=predicate, aliases=aliases
    )
    return finetune_kbert(
        train,
        dev,
        encoder=encoder,
        tokenizer=tokenizer,
        knowledge=knowledge,
        label_names=labels,
        trainer=trainer,
        max_entities=options.max_entities,
        max_length=data.max_length,
        batch_size=data.batch_size,
        kg=_switch(options.kg, "full", "none"),  # type: ignore[arg-type]
        visible_matrix=_switch(options.visible_matrix, "on", "off"),  # type: ignore[arg-type]
        dropout=objective.get("dropout", 0.1),
        seed=cfg.seed,
        provenance={
            "train": str(data.corpus),
            "dev": str(data.dev),
            "kg_path": str(data.kg),
            "predicate": predicate,
            "aliases": aliases,
            "init_from": str(init_from) if init_from else None,
        },
    )
