"""K-BERT's lookup table from a knowledge graph: entity name -> objects in priority order."""

from __future__ import annotations

from ptm_knowledge.kg import KnowledgeGraph


def knowledge_from_graph(
    kg: KnowledgeGraph, *, predicate: bool = True, aliases: bool = False
) -> dict[str, list[str]]:
    """Map each entity's name (and optionally aliases) to its triples' objects.

    The reference K-BERT reads ``subject \\t predicate \\t object`` lines into a dict of
    sets; here the priority order is the triple file's order, so ``max_entities``
    picks the same branches every run.

    Args:
        kg: a loaded graph (:func:`ptm_knowledge.kg.load_knowledge_graph`).
        predicate: prefix each object with its relation, underscores as spaces
            (``"capital of Poland"``), as the paper's ``"CEO Apple"``.
        aliases: also key the objects by every alias (ambiguous aliases such as ``Paris``
            for Paris of Troy then merge the objects of several entities: off by default).

    Returns:
        ``{surface string: [object, ...]}`` with duplicates removed, first occurrence kept.
    """
    objects: dict[str, list[str]] = {}
    for triple in kg.triples:
        tail = kg[triple.tail].name
        text = f"{triple.relation.replace('_', ' ')} {tail}" if predicate else tail
        objects.setdefault(triple.head, []).append(text)
    table: dict[str, list[str]] = {}
    for entity in kg.entities:
        if entity.id not in objects:
            continue
        for surface in entity.surface_forms if aliases else (entity.name,):
            merged = table.setdefault(surface, [])
            merged += [o for o in objects[entity.id] if o not in merged]
    return table
