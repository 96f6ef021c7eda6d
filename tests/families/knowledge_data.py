"""Generated knowledge data for the knowledge families' contract cases (not the samples).

A small KG of made-up people, cities and countries (``entities.tsv`` + ``triples.tsv``), a
linked corpus and a plain text corpus that mention them, and labelled TSVs (entity typing:
is the entity a person, a city or a country?) for the fine-tuning families.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from ptm_knowledge.linking.corpus import LinkedDocument, SentenceMention, write_linked_corpus

_SYLLABLES = ["ka", "lo", "mi", "ra", "tu", "ve", "zo", "ne", "sa", "di", "po", "gu"]
_FILLER = ["we", "read", "about", "the", "story", "of", "people", "near", "old", "river"]
TYPES = ("person", "city", "country")


@dataclass
class GeneratedKnowledge:
    """Paths of the generated data."""

    kg: Path
    linked_corpus: Path
    corpus: Path
    train: Path
    dev: Path
    entity_ids: list[str]


def _name(rng: random.Random, seen: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()
        if name not in seen:
            seen.add(name)
            return name


def generate(folder: Path, *, num_entities: int = 36, seed: int = 7) -> GeneratedKnowledge:
    """Write the KG, the corpora and the typing TSVs under ``folder``."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    entities = [(f"e{i}", _name(rng, seen), TYPES[i % 3]) for i in range(num_entities)]
    kg = folder / "kg"
    kg.mkdir(exist_ok=True)
    lines = ["id\tname\ttype\taliases\tdescription"]
    lines += [f"{e}\t{n}\t{t}\t\tA made-up {t} called {n}." for e, n, t in entities]
    (kg / "entities.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    people = [e for e in entities if e[2] == "person"]
    cities = [e for e in entities if e[2] == "city"]
    countries = [e for e in entities if e[2] == "country"]
    triples = [f"{p[0]}\tborn_in\t{rng.choice(cities)[0]}" for p in people]
    triples += [f"{c[0]}\tlocated_in\t{rng.choice(countries)[0]}" for c in cities]
    (kg / "triples.tsv").write_text("\n".join(triples) + "\n", encoding="utf-8")

    documents: list[LinkedDocument] = []
    text_lines: list[str] = []
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
        text_lines += [*sentences, ""]
    linked = write_linked_corpus(documents, folder / "linked.jsonl")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(text_lines), encoding="utf-8")

    def typing(path: Path, rows: list[tuple[str, str, str]]) -> Path:
        body = [f"{t}\tWe talked about {n} today." for _, n, t in rows]
        path.write_text("\n".join(["label\tsentence", *body]) + "\n", encoding="utf-8")
        return path

    half = len(entities) * 2 // 3
    return GeneratedKnowledge(
        kg=kg,
        linked_corpus=linked,
        corpus=corpus,
        train=typing(folder / "train.tsv", entities[:half] * 2),
        dev=typing(folder / "dev.tsv", entities[half:]),
        entity_ids=[e for e, _, _ in entities],
    )
