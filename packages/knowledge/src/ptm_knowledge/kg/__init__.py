"""Knowledge graphs: entity tables, triples, and PyKEEN embeddings keyed by our ids.

The embedding names load on first use (PEP 562): reading a KG or WordNet does not import
torch and PyKEEN (5 s and 500 MiB).
"""

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports
from ptm_knowledge.kg.graph import (
    Entity,
    KGError,
    KnowledgeGraph,
    Triple,
    read_entity_table,
    read_triples,
)
from ptm_knowledge.kg.load import load_knowledge_graph

_EXPORTS = {
    name: "ptm_knowledge.kg.embeddings"
    for name in (
        "KGEmbeddingResult",
        "check_embedding_settings",
        "load_entity_embeddings",
        "save_entity_embeddings",
        "train_kg_embeddings",
    )
}

if TYPE_CHECKING:
    from ptm_knowledge.kg.embeddings import (
        KGEmbeddingResult,
        check_embedding_settings,
        load_entity_embeddings,
        save_entity_embeddings,
        train_kg_embeddings,
    )

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

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
