"""KEPLER (Wang et al., 2021): one encoder for text (MLM) and knowledge embedding (KE).

Entity embeddings are the encoder's ``[CLS]`` states of the entity descriptions
(:mod:`~ptm_knowledge.kepler.descriptions`); a TransE-form KE loss with negative sampling
(:mod:`~ptm_knowledge.kepler.ke_loss`) joins MLM in the objective mix
(:class:`KnowledgeEmbeddingObjective`); link prediction is measured with PyKEEN's filtered,
realistic rank metrics (:mod:`~ptm_knowledge.kepler.link_prediction`).
"""

from ptm_knowledge.kepler.descriptions import (
    EntityDescriptions,
    check_descriptions,
    load_description_graph,
    tokenize_descriptions,
)
from ptm_knowledge.kepler.ke_loss import corrupt_triples, ke_loss, transe_distance
from ptm_knowledge.kepler.link_prediction import (
    KnownTriples,
    encode_entities,
    expected_random_metrics,
    link_prediction_ranks,
    random_scorer,
    rank_metrics,
    realistic_ranks,
    split_triples,
    transe_scorer,
)
from ptm_knowledge.kepler.objective import KnowledgeEmbeddingObjective, encode_descriptions
from ptm_knowledge.kepler.pretraining import (
    KeplerResult,
    evaluate_kepler,
    fixed_split,
    plan_kepler,
    random_baseline,
    triple_array,
)

__all__ = [
    "EntityDescriptions",
    "KeplerResult",
    "KnowledgeEmbeddingObjective",
    "KnownTriples",
    "check_descriptions",
    "corrupt_triples",
    "encode_descriptions",
    "encode_entities",
    "evaluate_kepler",
    "expected_random_metrics",
    "fixed_split",
    "ke_loss",
    "link_prediction_ranks",
    "load_description_graph",
    "plan_kepler",
    "random_baseline",
    "random_scorer",
    "rank_metrics",
    "realistic_ranks",
    "split_triples",
    "tokenize_descriptions",
    "transe_distance",
    "transe_scorer",
    "triple_array",
]
