"""More generated knowledge data for the ERNIE, K-BERT and KG-embedding contract cases.

On top of :mod:`generated_knowledge`'s KG and text corpus (not the samples): a linked
corpus of its entities (as the linker writes it) and labelled TSVs (entity typing: is the
entity a person, a city or a country?) for the fine-tuning families.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from generated_knowledge import write_knowledge

from ptm_knowledge.linking.corpus import LinkedDocument, SentenceMention, write_linked_corpus

_FILLER = ["we", "read", "about", "the", "story", "of", "people", "near", "old", "river"]


@dataclass
class GeneratedKnowledge:
    """Paths of the generated data."""

    kg: Path
    linked_corpus: Path
    corpus: Path
    train: Path
    dev: Path
    entity_ids: list[str]


def generate(folder: Path, *, seed: int = 7) -> GeneratedKnowledge:
    """The generated KG and corpus (:func:`generated_knowledge.write_knowledge`) under
    ``folder``, plus a linked corpus of its entities and entity-typing TSVs."""
    rng = random.Random(seed)
    kg, corpus = write_knowledge(folder, seed=seed)
    rows = [line.split("\t") for line in (kg / "entities.tsv").read_text().splitlines()[1:]]
    entities = [(row[0], row[1], row[2]) for row in rows if row and row[0]]
    # More facts per entity, so PyKEEN's 90 % training split still covers every entity.
    people = [e for e, _, t in entities if t == "person"]
    cities = [e for e, _, t in entities if t == "city"]
    extra = [f"{p}\tlives_in\t{rng.choice(cities)}" for p in people]
    extra += [f"{p}\tknows\t{rng.choice(people)}" for p in people for _ in range(2)]
    with (kg / "triples.tsv").open("a", encoding="utf-8") as handle:
        handle.write("\n".join(extra) + "\n")
    documents: list[LinkedDocument] = []
    for d in range(24):
        sentences: list[str] = []
        mentions: list[SentenceMention] = []
        for _ in range(6):
            text = " ".join(rng.sample(_FILLER, 3)) + " "
            entity_id, name, _ = rng.choice(entities)
            mentions.append(
                SentenceMention(len(sentences), len(text), len(text) + len(name), entity_id)
            )
            text += name + " " + " ".join(rng.sample(_FILLER, 2)) + "."
            sentences.append(text[0].upper() + text[1:])
        documents.append(LinkedDocument(f"doc{d}", sentences, mentions))
    linked = write_linked_corpus(documents, folder / "linked.jsonl")

    def typing(path: Path, rows: list[tuple[str, str, str]]) -> Path:
        body = [f"{t}\tWe talked about {n} today." for _, n, t in rows]
        path.write_text("\n".join(["label\tsentence", *body]) + "\n", encoding="utf-8")
        return path

    train_rows: list[tuple[str, str, str]] = []
    dev_rows: list[tuple[str, str, str]] = []
    for kind in sorted({t for _, _, t in entities}):  # every type in both splits
        of_kind = [e for e in entities if e[2] == kind]
        rng.shuffle(of_kind)
        cut = max(1, len(of_kind) * 2 // 3)
        train_rows += of_kind[:cut]
        dev_rows += of_kind[cut:]
    return GeneratedKnowledge(
        kg=kg,
        linked_corpus=linked,
        corpus=corpus,
        train=typing(folder / "train.tsv", train_rows * 2),
        dev=typing(folder / "dev.tsv", dev_rows),
        entity_ids=[e for e, _, _ in entities],
    )
