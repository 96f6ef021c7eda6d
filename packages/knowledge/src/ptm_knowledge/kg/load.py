"""Loading a knowledge graph from its TSV files, through the memory-mapped cache if asked.

:mod:`ptm_knowledge.kg.graph` parses and validates the files;
:mod:`ptm_knowledge.kg.cache` stores the parsed graph under the files' hash. This module
sits above both and picks one.
"""

from __future__ import annotations

import functools
from pathlib import Path

from ptm_knowledge.kg.cache import cached_knowledge_graph
from ptm_knowledge.kg.graph import KnowledgeGraph, parse_knowledge_graph

__all__ = ["load_knowledge_graph"]


def load_knowledge_graph(
    entities: str | Path,
    triples: str | Path | None = None,
    *,
    cache_dir: str | Path | None = None,
) -> KnowledgeGraph:
    """Load and validate an entity table and (optionally) its triples.

    Args:
        entities: ``entities.tsv`` path, or a directory holding ``entities.tsv`` and
            ``triples.tsv``.
        triples: ``triples.tsv`` path (default: beside the entity table, if present).
        cache_dir: if given, the validated graph (columns, triple arrays and adjacency) is
            stored there once under the SHA-256 of the input files, and later loads of the
            same files memory-map it instead of parsing them again
            (:mod:`ptm_knowledge.kg.cache`).

    Returns:
        A :class:`KnowledgeGraph`.
    """
    entities = Path(entities)
    if entities.is_dir():
        folder = entities
        entities = folder / "entities.tsv"
        if triples is None and (folder / "triples.tsv").exists():
            triples = folder / "triples.tsv"
    triples_path = Path(triples) if triples is not None else None
    if cache_dir is not None:
        return cached_knowledge_graph(
            entities,
            triples_path,
            Path(cache_dir),
            functools.partial(parse_knowledge_graph, entities, triples_path),
        )
    return parse_knowledge_graph(entities, triples_path)
