"""Knowledge graphs: entity tables, triples, and PyKEEN embeddings keyed by our ids."""

from ptm_knowledge.kg.embeddings import (
    KGEmbeddingResult,
    check_embedding_settings,
    load_entity_embeddings,
    save_entity_embeddings,
    train_kg_embeddings,
)
from ptm_knowledge.kg.graph import (
    Entity,
    KGError,
    KnowledgeGraph,
    Triple,
    read_entity_table,
    read_triples,
)
from ptm_knowledge.kg.load import load_knowledge_graph

__all__ = [
    "Entity",
    "KGEmbeddingResult",
    "KGError",
    "KnowledgeGraph",
    "Triple",
    "check_embedding_settings",
    "load_entity_embeddings",
    "load_knowledge_graph",
    "read_entity_table",
    "read_triples",
    "save_entity_embeddings",
    "train_kg_embeddings",
]
