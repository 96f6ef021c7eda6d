"""Multi-hop QA data: HotpotQA-format examples, a reader for real data and a generator.

The generator writes entity paragraphs from a knowledge graph (the entity description plus
one templated sentence per outgoing triple) and asks 2-hop *bridge* questions over them, as
in HotpotQA (Yang et al., 2018, "HotpotQA: A Dataset for Diverse, Explainable Multi-hop
Question Answering"): ``A --r1--> B --r2--> C`` gives "What is the <r2> of the <r1> of A?"
with answer ``C``, gold supporting sentences ``(A, A r1 B)`` and ``(B, B r2 C)`` and
distractor paragraphs chosen among entities with the same relation ``r2`` (hard
distractors) and then at random. Everything is deterministic given the seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from ptm_core.atomic import atomic_write_text
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.hotpot_file import open_hotpot_json
from ptm_knowledge.kg.graph import KnowledgeGraph

# relation -> (sentence verb phrase "head <phrase> tail", question noun "the <noun> of X").
RELATION_TEMPLATES: dict[str, tuple[str, str]] = {
    "award_received": ("received the", "award"),
    "born_in": ("was born in", "birthplace"),
    "capital_of": ("is the capital of", "country"),
    "child": ("is the parent of", "child"),
    "citizen_of": ("was a citizen of", "country of citizenship"),
    "created": ("created", "creation"),
    "designed": ("designed", "design"),
    "destination": ("had as destination", "destination"),
    "developed_at": ("was developed at", "place of development"),
    "died_in": ("died in", "place of death"),
    "discovered": ("discovered", "discovery"),
    "educated_at": ("was educated at", "school"),
    "field": ("worked in the field of", "field"),
    "flows_through": ("flows through", "country of flow"),
    "found_in": ("is found in", "source mineral"),
    "invented": ("invented", "invention"),
    "lived_in": ("lived in", "residence"),
    "located_in": ("is located in", "location"),
    "mouth": ("flows into", "mouth"),
    "named_after": ("is named after", "namesake"),
    "operator": ("is operated by", "operator"),
    "orbits": ("orbits", "orbited body"),
    "part_of": ("is part of", "whole"),
    "participant_in": ("took part in", "event"),
    "reached": ("reached", "destination reached"),
    "shares_border_with": ("shares a border with", "neighbour"),
    "source": ("rises in", "source"),
    "spouse": ("is the spouse of", "spouse"),
    "studied": ("studied", "subject of study"),
    "subclass_of": ("is a kind of", "superclass"),
    "worked_at": ("worked at", "workplace"),
}


def entity_paragraphs(
    kg: KnowledgeGraph, *, max_sentences: int = 8
) -> dict[str, tuple[str, list[str], list[tuple[str, str]]]]:
    """Write one paragraph per entity from its description and outgoing triples.

    Args:
        kg: the knowledge graph (entity names, descriptions and triples).
        max_sentences: longest paragraph (description included); later triples are dropped.

    Returns:
        ``entity id -> (title, sentences, facts)`` where ``facts[i]`` is the
        ``(relation, tail id)`` stated by sentence ``i`` (``("", "")`` for the description).
    """
    out: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {}
    for entity in kg.entities:
        sentences: list[str] = []
        facts: list[tuple[str, str]] = []
        if entity.description:
            sentences.append(f"{entity.name} : {entity.description}")
            facts.append(("", ""))
        for triple in kg.triples:
            if triple.head != entity.id or len(sentences) >= max_sentences:
                continue
            verb = RELATION_TEMPLATES.get(triple.relation, (triple.relation.replace("_", " "),))[0]
            sentences.append(f"{entity.name} {verb} {kg[triple.tail].name} .")
            facts.append((triple.relation, triple.tail))
        if sentences:
            out[entity.id] = (entity.name, sentences, facts)
    return out


def _functional(facts: list[tuple[str, str]]) -> dict[str, tuple[int, str]]:
    """``relation -> (sentence index, tail)`` for relations with exactly one tail."""
    counts: dict[str, int] = {}
    for rel, _ in facts:
        counts[rel] = counts.get(rel, 0) + 1
    return {rel: (i, tail) for i, (rel, tail) in enumerate(facts) if rel and counts[rel] == 1}


def generate_bridge_questions(
    kg: KnowledgeGraph,
    *,
    num_questions: int | None = None,
    num_distractors: int = 4,
    seed: int = 0,
    max_sentences: int = 8,
    style: str = "verb",
) -> list[MultiHopExample]:
    """Generate 2-hop bridge questions with gold supporting facts and distractors.

    A chain ``A --r1--> B --r2--> C`` qualifies when ``r1`` has one tail in A's paragraph,
    ``r2`` one tail in B's, ``C`` differs from ``A`` and no name of B or C occurs in the
    question. Distractors are first entities whose paragraph also states ``r2`` (so a
    reader that ignores the bridge is fooled), then random entities.

    Args:
        kg: the knowledge graph with names and descriptions.
        num_questions: keep this many (a seeded sample); ``None`` keeps every chain.
        num_distractors: distractor paragraphs per question.
        seed: seed of every random choice.
        max_sentences: passed to :func:`entity_paragraphs`.
        style: ``"verb"`` reuses the paragraphs' relation phrases ("Egypt shares a border
            with something that is located in what ?", lexical overlap as in most HotpotQA
            bridge questions); ``"noun"`` paraphrases them ("What is the location of the
            neighbour of Egypt ?", harder for a tiny model trained from scratch).

    Returns:
        Examples sorted by a seeded shuffle; ids are ``bridge-<A>-<r1>-<r2>``.
    """
    rng = random.Random(seed)
    paragraphs = entity_paragraphs(kg, max_sentences=max_sentences)
    by_relation: dict[str, list[str]] = {}
    for eid, (_, _, facts) in paragraphs.items():
        for rel in sorted(_functional(facts)):
            by_relation.setdefault(rel, []).append(eid)
    chains: list[tuple[str, str, str, str, str]] = []
    for a, (_, _, facts_a) in paragraphs.items():
        for r1, (_, b) in sorted(_functional(facts_a).items()):
            if b not in paragraphs or b == a:
                continue
            for r2, (_, c) in sorted(_functional(paragraphs[b][2]).items()):
                if c in (a, b):
                    continue
                chains.append((a, r1, b, r2, c))
    rng.shuffle(chains)
    examples: list[MultiHopExample] = []
    for a, r1, b, r2, c in chains:
        phrase1 = RELATION_TEMPLATES.get(r1, (r1.replace("_", " "),) * 2)
        phrase2 = RELATION_TEMPLATES.get(r2, (r2.replace("_", " "),) * 2)
        if style == "verb":
            question = f"{kg[a].name} {phrase1[0]} something that {phrase2[0]} what ?"
        elif style == "noun":
            question = f"What is the {phrase2[1]} of the {phrase1[1]} of {kg[a].name} ?"
        else:
            raise ValueError(f"style must be 'verb' or 'noun', got {style!r}")
        lowered = question.lower()
        if any(form.lower() in lowered for e in (b, c) for form in kg[e].surface_forms):
            continue
        hard = [e for e in by_relation.get(r2, []) if e not in (a, b, c)]
        rng.shuffle(hard)
        chosen = hard[: num_distractors // 2 + 1]
        rest = sorted(e for e in paragraphs if e not in (a, b, c, *chosen))
        rng.shuffle(rest)
        chosen += rest[: num_distractors - len(chosen)]
        context_ids = [a, b, *chosen]
        rng.shuffle(context_ids)
        i1 = _functional(paragraphs[a][2])[r1][0]
        i2 = _functional(paragraphs[b][2])[r2][0]
        examples.append(
            MultiHopExample(
                id=f"bridge-{a}-{r1}-{r2}",
                question=question,
                answer=kg[c].name,
                context=[(paragraphs[e][0], list(paragraphs[e][1])) for e in context_ids],
                supporting_facts=[(kg[a].name, i1), (kg[b].name, i2)],
                aliases={kg[e].name: list(kg[e].aliases) for e in context_ids if kg[e].aliases},
            )
        )
        if num_questions is not None and len(examples) >= num_questions:
            break
    return examples


def read_hotpot_json(path: str | Path) -> list[MultiHopExample]:
    """Read a HotpotQA-format file (a JSON list of records, or JSON Lines) into a list.

    For a small split (a dev set). A train file of any size is better opened with
    :func:`~ptm_knowledge.cogqa.open_hotpot_json`, which validates in one streaming pass
    and parses records on access; this function is ``list(open_hotpot_json(path))``.

    Args:
        path: the JSON file (HotpotQA train/dev "distractor" layout).

    Returns:
        The examples in file order.

    Raises:
        MultiHopDataError: a missing file, invalid UTF-8 (with line and byte offset),
            invalid JSON (with line/column), an empty list, a record with a missing or
            malformed field (with the record's line, index and ``_id``), or an ``_id``
            used twice (naming both records).
    """
    return list(open_hotpot_json(path))


def write_hotpot_json(examples: Sequence[MultiHopExample], path: str | Path) -> Path:
    """Write ``examples`` as a HotpotQA-format JSON list, atomically (one record per line)."""
    lines = [json.dumps(ex.to_json(), ensure_ascii=False) for ex in examples]
    return atomic_write_text(path, "[\n" + ",\n".join(lines) + "\n]\n")
