"""Regenerate the KG entity-typing sample: ``python data_specs/kg_entity_typing/make_sample.py``.

Each sentence names one entity of the sample KG (``../knowledge_graph/sample``) inside a
neutral template ("The quiz question was about {}."); the label is the entity's coarse
kind, ``person``, ``city`` or ``country``. The template never says which, and the dev
entities never occur in the training sentences, so on dev only the KG input can carry the
answer: the kind shows in an entity's facts (people are ``born_in`` / ``citizen_of`` /
``award_received``, cities ``located_in`` a country or ``capital_of`` one, countries
``located_in`` a continent or ``shares_border_with`` a neighbour), which is what TransE
embeds for ERNIE-THU and what K-BERT injects as branches.

Deterministic: the same KG files give byte-identical ``train.tsv`` and ``dev.tsv``.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KG_DIR = HERE.parent / "knowledge_graph" / "sample"
# The labels, and the KG entity types each one covers.
LABELS: dict[str, tuple[str, ...]] = {
    "person": ("person",),
    "city": ("city",),
    "country": ("country",),
}
# Neutral about the kind of entity: any of a person, a city or a country fits, and no
# template word is an alias of the KG (a test links every row and finds one mention).
TEMPLATES: tuple[str, ...] = (
    "The quiz question was about {}.",
    "She wrote a long essay on {} last winter.",
    "The old book had a whole chapter on {}.",
    "My neighbour keeps talking about {}.",
    "The documentary about {} was shown on Sunday.",
    "We argued about {} for an hour.",
    "He found an old postcard that mentioned {}.",
    "The lecture today was mostly about {}.",
    "A student asked a question about {}.",
    "The newspaper ran a story about {} again.",
    "Nobody at dinner knew much about {}.",
    "Her favourite podcast had an episode on {}.",
)
TRAIN_FRACTION = 0.6
DEV_TEMPLATES = 6  # dev sentences per entity (train uses every template)
SEED = 13


@dataclass(frozen=True)
class TypedEntity:
    """An entity of the sample: its id, the name the sentences use and its label."""

    entity_id: str
    name: str
    label: str


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    return [line.split("\t") for line in lines if line.strip() and not line.startswith("#")]


def typed_entities(kg_dir: Path = KG_DIR) -> list[TypedEntity]:
    """The entities the task uses, in entity-table order.

    Kept: entities whose ``type`` is one of :data:`LABELS`' types, that are the head of at
    least one triple (else the KG says nothing about them) and whose name is no other
    entity's alias (``Paris`` is also Paris of Troy), so a name links to one entity.
    """
    header, *entities = _rows(kg_dir / "entities.tsv")
    if header[:4] != ["id", "name", "type", "aliases"]:
        raise ValueError(f"{kg_dir / 'entities.tsv'}: unexpected header {header}")
    heads = Counter(row[0] for row in _rows(kg_dir / "triples.tsv"))
    surface = Counter(
        alias for row in entities for alias in {row[1], *(a for a in row[3].split("|") if a)}
    )
    label_of = {kind: label for label, kinds in LABELS.items() for kind in kinds}
    return [
        TypedEntity(row[0], row[1], label_of[row[2]])
        for row in entities
        if row[2] in label_of and heads[row[0]] > 0 and surface[row[1]] == 1
    ]


def split_entities(
    entities: Sequence[TypedEntity], seed: int = SEED, train_fraction: float = TRAIN_FRACTION
) -> tuple[list[TypedEntity], list[TypedEntity]]:
    """Disjoint train and dev entities, the same fraction of each label in train."""
    train: list[TypedEntity] = []
    dev: list[TypedEntity] = []
    rng = random.Random(seed)
    for label in LABELS:
        group = sorted((e for e in entities if e.label == label), key=lambda e: e.entity_id)
        rng.shuffle(group)
        cut = round(len(group) * train_fraction)
        train += group[:cut]
        dev += group[cut:]
    return train, dev


def sentences(
    entities: Sequence[TypedEntity], templates_per_entity: int | None, seed: int = SEED
) -> list[tuple[str, str]]:
    """``(label, sentence)`` rows: each entity in ``templates_per_entity`` templates (all
    when ``None``; otherwise a seeded choice per entity), shuffled with ``seed``."""
    rng = random.Random(seed)
    rows = []
    for entity in entities:
        chosen = list(TEMPLATES)
        if templates_per_entity is not None:
            chosen = rng.sample(chosen, templates_per_entity)
        rows += [(entity.label, template.format(entity.name)) for template in chosen]
    rng.shuffle(rows)
    return rows


def render(rows: Sequence[tuple[str, str]]) -> str:
    """The TSV text: a ``label<TAB>sentence`` header, one row per line."""
    return "".join(f"{label}\t{sentence}\n" for label, sentence in [("label", "sentence"), *rows])


def make_sample(out_dir: Path = HERE, kg_dir: Path = KG_DIR, seed: int = SEED) -> dict[str, Path]:
    """Write ``train.tsv`` and ``dev.tsv`` into ``out_dir``; returns their paths."""
    train, dev = split_entities(typed_entities(kg_dir), seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in (
        ("train", sentences(train, None, seed)),
        ("dev", sentences(dev, DEV_TEMPLATES, seed + 1)),
    ):
        paths[name] = out_dir / f"{name}.tsv"
        paths[name].write_text(render(rows), encoding="utf-8")
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--kg", type=Path, default=KG_DIR)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    for name, path in make_sample(args.out, args.kg, args.seed).items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
