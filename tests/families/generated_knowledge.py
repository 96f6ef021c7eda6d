"""A generated knowledge graph and a text corpus that mentions its entities (not the samples).

People born in cities that lie in countries, with made-up names, so nothing depends on the
bundled sample KG or its vocabulary: the tokenizer is trained on the generated corpus, the
linker links the corpus to the generated KG, and CogQA's bridge questions come from the
``born_in`` -> ``located_in`` chains.
"""

from __future__ import annotations

import random
from pathlib import Path

SYLLABLES = ("ka", "lo", "mi", "ren", "tas", "vo", "dun", "pel", "sor", "ia", "bek", "nur")


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in used:
            used.add(name)
            return name


def write_knowledge(root: Path, *, seed: int = 0, people: int = 24) -> tuple[Path, Path]:
    """Write ``root/kg/{entities,triples}.tsv`` and ``root/corpus.txt``; returns both paths.

    Every entity has a type and a description; each person is born in a city, each city
    lies in a country (functional relations: every person gives one 2-hop chain).
    """
    rng = random.Random(seed)
    used: set[str] = set()
    countries = [(f"country_{i}", _name(rng, used)) for i in range(3)]
    cities = [(f"city_{i}", _name(rng, used), countries[i % 3]) for i in range(6)]
    persons = [(f"person_{i}", f"{_name(rng, used)} {_name(rng, used)}") for i in range(people)]
    born = {pid: cities[rng.randrange(len(cities))] for pid, _ in persons}
    entities = ["id\tname\ttype\taliases\tdescription"]
    triples = []
    for cid, name in countries:
        entities.append(f"{cid}\t{name}\tcountry\t\tA country with rivers, farms and old towns.")
    for cid, name, (country, country_name) in cities:
        entities.append(f"{cid}\t{name}\tcity\t\tA city in {country_name} known for its markets.")
        triples.append(f"{cid}\tlocated_in\t{country}")
    for pid, name in persons:
        city = born[pid]
        first = name.split()[0]
        entities.append(
            f"{pid}\t{name}\tperson\t{first}\tA scholar from {city[1]} who wrote about stars."
        )
        triples.append(f"{pid}\tborn_in\t{city[0]}")
    kg = root / "kg"
    kg.mkdir(parents=True, exist_ok=True)
    (kg / "entities.tsv").write_text("\n".join(entities) + "\n", encoding="utf-8")
    (kg / "triples.tsv").write_text("\n".join(triples) + "\n", encoding="utf-8")
    documents = []
    for pid, name in persons:
        city, (_, country) = born[pid][1], born[pid][2]
        documents.append(
            "\n".join(
                [
                    f"{name} was born in {city}, a city of {country}.",
                    f"As a child {name} watched the stars above {city} every night.",
                    f"Later {name} left {country} to study the sky in a distant school.",
                    f"People in {city} still tell stories about {name} and the stars.",
                ]
            )
        )
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return kg, corpus
