"""KEPLER pre-training: MLM on the text corpus plus the KE loss on the KG, one encoder.

Wang et al. (2021), "KEPLER: A Unified Model for Knowledge Embedding and Pre-trained
Language Representation". The KE objective joins the text objectives in the core
:class:`~ptm_core.objectives.mix.ObjectiveMix` (each step sums ``w_mlm L_mlm + w_ke
L_ke``, both logged), and the core :func:`~ptm_core.pretraining.pretrain` runs it. After
training, link prediction on held-out triples is measured with PyKEEN's rank metrics.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.pretraining import (
    EncoderFactory,
    ObjectiveFactory,
    PretrainResult,
    open_training_corpus,
)
from ptm_core.tokenization import VocabInfo
from ptm_core.training import TrainerConfig
from ptm_core.training.distributed import is_main_process
from ptm_knowledge.kepler.descriptions import load_description_graph, tokenize_descriptions
from ptm_knowledge.kepler.link_prediction import (
    KnownTriples,
    encode_entities,
    expected_random_metrics,
    link_prediction_ranks,
    rank_metrics,
    split_triples,
    transe_scorer,
)
from ptm_knowledge.kepler.objective import KnowledgeEmbeddingObjective
from ptm_knowledge.kg.graph import KnowledgeGraph

logger = logging.getLogger(__name__)

LINK_PREDICTION_FILE = "link_prediction.json"


@dataclass
class KeplerResult(PretrainResult):
    """:class:`~ptm_core.pretraining.PretrainResult` plus link prediction.

    Attributes:
        link_prediction: test-split metrics of the trained model (``mrr``, ``hits_at_1``,
            ``hits_at_3``, ``hits_at_10``, ``mean_rank``, ``num_ranks``).
        random_baseline: their expectation under uniformly random ranking.
        num_train_triples, num_test_triples: the split.
        ke_objective: the trained KE objective (descriptions, relation table), in memory.
    """

    link_prediction: dict[str, float] = field(default_factory=dict)
    random_baseline: dict[str, float] = field(default_factory=dict)
    num_train_triples: int = 0
    num_test_triples: int = 0
    ke_objective: KnowledgeEmbeddingObjective | None = None


def triple_array(kg: KnowledgeGraph) -> np.ndarray:
    """``(T, 3)`` int64 ``(head, relation, tail)`` indices of the graph's triples."""
    t = kg.triples
    return np.stack([t.heads, t.relations, t.tails], axis=1).astype(np.int64)


def evaluate_kepler(
    encoder: TransformerEncoder,
    objective: KnowledgeEmbeddingObjective,
    test_triples: np.ndarray,
    known_triples: np.ndarray,
    *,
    batch_size: int = 256,
    candidates: torch.Tensor | None = None,
) -> dict[str, float]:
    """Filtered link-prediction metrics of a KEPLER model on ``test_triples``.

    Every entity is encoded once (:func:`~ptm_knowledge.kepler.link_prediction.encode_entities`),
    then ranked with the TransE score of the trained relation table.

    Args:
        encoder: the text encoder.
        objective: the KE objective (descriptions, relation table, norm).
        test_triples: ``(T, 3)`` triples to rank.
        known_triples: ``(K, 3)`` all known triples (for the filtered setting).
        batch_size: descriptions per forward pass and test triples per scoring batch.
        candidates: entity indices to rank among (default all).

    Returns:
        :func:`~ptm_knowledge.kepler.link_prediction.rank_metrics` of the head and tail ranks.
    """
    entities = encode_entities(encoder, objective.descriptions, batch_size=batch_size)
    relations = objective.relations.weight.detach().float().cpu()
    known = KnownTriples(known_triples, objective.num_entities, relations.shape[0])
    ranks = link_prediction_ranks(
        transe_scorer(entities, relations, objective.p_norm),
        test_triples,
        known,
        batch_size=batch_size,
        candidates=candidates,
    )
    return rank_metrics(ranks)


def random_baseline(
    test_triples: np.ndarray,
    known_triples: np.ndarray,
    num_entities: int,
    num_relations: int,
    *,
    candidates: torch.Tensor | None = None,
) -> dict[str, float]:
    """The expected rank metrics of a uniformly random ranking, same split and filter
    (:func:`~ptm_knowledge.kepler.link_prediction.expected_random_metrics`)."""
    known = KnownTriples(known_triples, num_entities, num_relations)
    return expected_random_metrics(test_triples, known, candidates=candidates)


def pretrain_kepler(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    kg: str | Path,
    encoder: EncoderFactory | TransformerEncoder,
    objectives: Mapping[str, ObjectiveFactory],
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    weights: Mapping[str, float] | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    ke_batch_size: int = 16,
    num_negatives: int = 1,
    margin: float = 4.0,
    p_norm: float = 1.0,
    ke_weight: float = 1.0,
    description_max_length: int = 64,
    allow_missing_descriptions: bool = True,
    test_fraction: float = 0.1,
    split: tuple[np.ndarray, np.ndarray] | None = None,
    candidates: torch.Tensor | None = None,
    eval_batch_size: int = 256,
    callbacks: Sequence[object] = (),
    num_workers: int = 0,
    cache_dir: str | Path | None = None,
) -> KeplerResult:
    """Pre-train one encoder on MLM (text) and KE (KG), then evaluate link prediction.

    Args:
        corpus, prepared: the text corpus, as :func:`~ptm_core.pretraining.pretrain`.
        kg: a folder with ``entities.tsv`` (with a ``description`` column) and
            ``triples.tsv``.
        encoder: the encoder or its factory (``vocab_size=``).
        objectives: the text objectives (``{"mlm": ...}``), factories called with
            ``vocab=`` and the encoder's numbers (``build_objective``); ``"ke"`` is added here.
        trainer: trainer settings.
        weights: loss weights of ``objectives``.
        tokenizer, vocab_size, lowercase, max_length, batch_size, seed, callbacks,
            num_workers, cache_dir: as :func:`~ptm_core.pretraining.pretrain`.
        ke_batch_size: triples per step.
        num_negatives: negatives per triple.
        margin: the KE margin ``gamma``.
        p_norm: the norm of the TransE distance.
        ke_weight: weight of the KE loss in the mix.
        description_max_length: description tokens per entity with ``[CLS]``/``[SEP]``.
        allow_missing_descriptions: encode the name of entities without description.
        test_fraction: held-out share of the triples (when ``split`` is not given).
        split: ``(train, test)`` ``(T, 3)`` index triples to use instead (the benchmark
            passes PyKEEN's split here).
        candidates: entity indices to rank among (default all).
        eval_batch_size: descriptions per forward pass at evaluation.

    Returns:
        :class:`KeplerResult`; ``final_metrics`` also carries ``link_prediction/<metric>``
        and ``random_baseline/<metric>``, and ``<output_dir>/link_prediction.json`` holds
        both.
    """
    graph = load_description_graph(kg, allow_missing=allow_missing_descriptions)
    triples = triple_array(graph)
    train, test = split if split is not None else split_triples(triples, test_fraction, seed)
    num_relations = len(graph.triples.relation_names)
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    _, tok = open_training_corpus(
        corpus,
        prepared,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        cache_dir=cache_dir,
        run_dir=output_dir,
    )
    vocab = tok.vocab_info
    descriptions = tokenize_descriptions(
        graph,
        tok,
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        pad_id=vocab.pad_id,
        max_length=description_max_length,
        fallback_to_name=allow_missing_descriptions,
    )
    built: list[KnowledgeEmbeddingObjective] = []

    def make_ke(encoder: TransformerEncoder, vocab: VocabInfo) -> KnowledgeEmbeddingObjective:
        objective = KnowledgeEmbeddingObjective(
            encoder,
            vocab,
            descriptions=descriptions,
            triples=train,
            num_relations=num_relations,
            batch_size=ke_batch_size,
            num_negatives=num_negatives,
            margin=margin,
            p_norm=p_norm,
        )
        built.append(objective)
        return objective

    if "ke" in objectives:
        raise ValueError("the text objectives must not be named 'ke' (the KE objective's name)")
    from ptm_core.families import get
    from ptm_core.families.core_settings import TextData, TextSettings
    from ptm_core.families.runner import PretrainRun, run_pretraining

    def text(path: Any) -> Any:
        if path is None or isinstance(path, (str, Path)):
            return None if path is None else str(path)
        return [str(p) for p in path]

    data = TextData(
        corpus=text(corpus),
        prepared=text(prepared),
        cache_dir=text(cache_dir),
        tokenizer=text(tokenizer),
        vocab_size=vocab_size,
        lowercase=lowercase,
        max_length=max_length,
        batch_size=batch_size,
        num_workers=num_workers,
    )
    # The text side is the encoder family's pre-training, with the KE objective added.
    result: PretrainResult = run_pretraining(
        get("encoder"),
        PretrainRun(
            settings=TextSettings(data=data),
            model=encoder,
            objectives={**objectives, "ke": make_ke},
            weights={**(weights or {}), "ke": ke_weight},
            trainer=trainer,
            seed=seed,
            callbacks=callbacks,
        ),
    )
    objective = built[-1]
    metrics = evaluate_kepler(
        objective.text_encoder,
        objective,
        test,
        triples,
        batch_size=eval_batch_size,
        candidates=candidates,
    )
    baseline = random_baseline(test, triples, len(graph), num_relations, candidates=candidates)
    logger.info("KEPLER link prediction: %s (random ranking: %s)", metrics, baseline)
    report: dict[str, Any] = {
        "test": metrics,
        "random_baseline": baseline,
        "num_train": len(train),
        "num_test": len(test),
        "setting": "filtered, realistic ranks, head and tail (PyKEEN 'both')",
    }
    if is_main_process():
        atomic_write_text(output_dir / LINK_PREDICTION_FILE, json.dumps(report, indent=2) + "\n")
    final = dict(result.final_metrics)
    final.update({f"link_prediction/{k}": v for k, v in metrics.items()})
    final.update({f"random_baseline/{k}": v for k, v in baseline.items()})
    return KeplerResult(
        output_dir=result.output_dir,
        encoder_dir=result.encoder_dir,
        tokenizer_dir=result.tokenizer_dir,
        metrics_path=result.metrics_path,
        last_checkpoint=result.last_checkpoint,
        final_metrics=final,
        num_examples=result.num_examples,
        link_prediction=metrics,
        random_baseline=baseline,
        num_train_triples=len(train),
        num_test_triples=len(test),
        ke_objective=objective,
    )
