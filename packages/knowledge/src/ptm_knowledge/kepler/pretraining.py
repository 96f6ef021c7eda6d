"""KEPLER pre-training: MLM on the text corpus plus the KE loss on the KG, one encoder.

Wang et al. (2021), "KEPLER: A Unified Model for Knowledge Embedding and Pre-trained
Language Representation". The KE objective joins the text objectives in the core
:class:`~ptm_core.objectives.mix.ObjectiveMix` (each step sums ``w_mlm L_mlm + w_ke
L_ke``, both logged); :func:`plan_kepler` is the family's ``plan_pretraining`` hook, run by
the one pre-training runner (:func:`ptm_core.families.runner.run_pretraining`). After
training, link prediction on held-out triples is measured with PyKEEN's rank metrics.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptm_core.atomic import atomic_write_text
from ptm_core.data.batches import PretrainingBatches
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.whole_word import UsesWordBoundaries
from ptm_core.pretraining import (
    PretrainResult,
    build_examples,
    open_training_corpus,
    save_heads,
)
from ptm_core.seeding import derive_seed
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_core.training.distributed import is_main_process
from ptm_core.training.run import TrainingRun
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
from ptm_knowledge.kg.graph import KGError, KnowledgeGraph, read_triples

if TYPE_CHECKING:
    from ptm_knowledge.family_kepler import KeplerOptions, KeplerSettings

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


def fixed_split(
    graph: KnowledgeGraph, train_file: str | Path, test_file: str | Path
) -> tuple[np.ndarray, np.ndarray]:
    """``(train, test)`` index triples read from two ``triples.tsv`` files of the graph's ids.

    Raises:
        KGError: a bad line or an unknown entity (``file:line``), or a relation the graph
            does not have.
    """
    relation_index = {name: i for i, name in enumerate(graph.triples.relation_names)}

    def read(path: str | Path) -> np.ndarray:
        table = read_triples(path, graph.entity_ids)
        unknown = sorted(set(table.relation_names) - set(relation_index))
        if unknown:
            raise KGError(
                path,
                None,
                "relation",
                f"relation {unknown[0]!r} is not in the knowledge graph's triples.tsv",
                "a fixed split uses the graph's own relations",
            )
        remap = np.array([relation_index[n] for n in table.relation_names], dtype=np.int64)
        relations = remap[table.relations] if len(table) else table.relations
        return np.stack([table.heads, relations, table.tails], axis=1).astype(np.int64)

    return read(train_file), read(test_file)


def _split(graph: KnowledgeGraph, options: KeplerOptions, seed: int) -> tuple[np.ndarray, ...]:
    triples = triple_array(graph)
    given = (options.train_triples, options.test_triples)
    if any(given) and not all(given):
        raise ValueError(
            "kepler.train_triples and kepler.test_triples give a fixed split together: set "
            "both, or neither (kepler.test_fraction then splits the KG's triples)"
        )
    if options.train_triples and options.test_triples:
        train, test = fixed_split(graph, options.train_triples, options.test_triples)
    else:
        train, test = split_triples(triples, options.test_fraction, seed)
    return triples, train, test


def plan_kepler(run: PretrainRun) -> PretrainingPlan:
    """KEPLER's pre-training: MLM on ``data.corpus`` plus the KE loss on ``data.kg``.

    The text objectives are ``objective.objectives`` (``"ke"`` is added here, weighted by
    ``kepler.ke_weight``); entity embeddings are the encoder's ``[CLS]`` states of the
    entity descriptions. After training, link prediction on the held-out triples
    (:func:`evaluate_kepler`, next to :func:`random_baseline`) goes into the result's
    ``final_metrics`` (``link_prediction/<metric>``, ``random_baseline/<metric>``) and
    ``<output_dir>/link_prediction.json``.

    Args:
        run: the runner's run; ``run.settings`` is a
            :class:`~ptm_knowledge.family_kepler.KeplerSettings`.

    Returns:
        The plan; its ``finish`` returns a :class:`KeplerResult`.
    """
    settings: KeplerSettings = run.settings
    data, options = settings.data, settings.kepler
    if run.model is None:
        raise ValueError("KEPLER needs a model: an encoder builder (model=bert_tiny)")
    if "ke" in run.objectives:
        raise ValueError("the text objectives must not be named 'ke' (the KE objective's name)")
    graph = load_description_graph(
        data.require_kg(), allow_missing=options.allow_missing_descriptions
    )
    triples, train, test = _split(graph, options, run.seed)
    num_relations = len(graph.triples.relation_names)
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_training_corpus(
        None if data.prepared else data.corpus,
        data.prepared,
        tokenizer=None if data.prepared else data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.cache_dir,
        run_dir=output_dir,
    )
    if not isinstance(tok, WordPieceTokenizer):
        raise ValueError(
            f"data.tokenizer={data.tokenizer}: KEPLER reads entity descriptions and word "
            "boundaries with a WordPiece tokenizer, and this one is BPE/Unigram; give a BERT "
            "folder or vocab.txt, or leave data.tokenizer unset to train one"
        )
    vocab = tok.vocab_info
    descriptions = tokenize_descriptions(
        graph,
        tok,
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        pad_id=vocab.pad_id,
        max_length=options.description_max_length,
        fallback_to_name=options.allow_missing_descriptions,
    )

    def make_ke(encoder: TransformerEncoder, vocab: VocabInfo) -> KnowledgeEmbeddingObjective:
        return KnowledgeEmbeddingObjective(
            encoder,
            vocab,
            descriptions=descriptions,
            triples=train,
            num_relations=num_relations,
            batch_size=options.ke_batch_size,
            num_negatives=options.num_negatives,
            margin=options.margin,
            p_norm=options.p_norm,
        )

    # Initial weights depend on the seed only, not on what ran before in this process.
    torch.manual_seed(derive_seed(run.seed, "init"))
    encoder: TransformerEncoder = run.model(vocab_size=vocab.vocab_size)
    if data.max_length > encoder.config.max_positions:
        raise ValueError(
            f"data.max_length={data.max_length} exceeds the encoder's max_positions="
            f"{encoder.config.max_positions}; lower data.max_length or raise max_positions"
        )
    factories = {**run.objectives, "ke": make_ke}
    mix = ObjectiveMix(
        {name: build_objective(make, encoder, vocab) for name, make in factories.items()},
        {**{k: float(v) for k, v in run.weights.items()}, "ke": options.ke_weight},
    )
    for _, objective in mix:
        if isinstance(objective, UsesWordBoundaries):
            objective.bind_tokenizer(tok)  # word boundaries from the run's own tokenizer
    examples = build_examples(mix, store, vocab, data.max_length, run.seed)
    batches = PretrainingBatches(
        examples,
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
        structured_masks=run.trainer.structured_masks,
    )
    ke = dict(mix)["ke"]
    assert isinstance(ke, KnowledgeEmbeddingObjective)

    def finish(trained: TrainingRun) -> KeplerResult:
        metrics = evaluate_kepler(encoder, ke, test, triples, batch_size=options.eval_batch_size)
        baseline = random_baseline(test, triples, len(graph), num_relations)
        logger.info("KEPLER link prediction: %s (random ranking: %s)", metrics, baseline)
        report: dict[str, Any] = {
            "test": metrics,
            "random_baseline": baseline,
            "num_train": len(train),
            "num_test": len(test),
            "setting": "filtered, realistic ranks, head and tail (PyKEEN 'both')",
        }
        if is_main_process():
            text = json.dumps(report, indent=2) + "\n"
            atomic_write_text(output_dir / LINK_PREDICTION_FILE, text)
        final = dict(trained.final_metrics)
        final.update({f"link_prediction/{k}": v for k, v in metrics.items()})
        final.update({f"random_baseline/{k}": v for k, v in baseline.items()})
        return KeplerResult.of_run(
            trained,
            output_dir,
            len(examples),
            final_metrics=final,
            link_prediction=metrics,
            random_baseline=baseline,
            num_train_triples=len(train),
            num_test_triples=len(test),
            ke_objective=ke,
        )

    return PretrainingPlan(
        network=encoder,
        objectives=mix,
        data=batches,
        save_final=lambda final: encoder.save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix, encoder, path)]
        ),
        finish=finish,
    )
