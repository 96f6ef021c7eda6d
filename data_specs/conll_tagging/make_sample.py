"""Regenerate the CoNLL tagging sample (CC0): ``python data_specs/conll_tagging/make_sample.py``.

Sentences state the facts of the sample KG (``../knowledge_graph/sample``), one per triple,
with the entity names tagged PER/LOC/ORG/MISC in BIO (IOB2) form, plus a few hand-written
sentences where a name's type depends on its context (Paris the prince, Curie the person).
A document (``-DOCSTART-``) holds the sentences about one subject. Every fourth triple goes
to ``dev.txt``, so dev holds new combinations of names; ``dev.txt`` also holds names never
tagged in train.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
KG = HERE.parent / "knowledge_graph" / "sample"

TEMPLATES = {
    "born_in": "{h} was born in {t} .",
    "died_in": "{h} died in {t} .",
    "lived_in": "For many years {h} lived in {t} .",
    "worked_at": "{h} worked at {t} .",
    "educated_at": "{h} studied at {t} .",
    "capital_of": "{h} is the capital of {t} .",
    "citizen_of": "{h} was a citizen of {t} .",
    "located_in": "{h} lies in {t} .",
    "flows_through": "{h} flows through {t} .",
    "source": "{h} rises in {t} .",
    "mouth": "{h} flows into {t} .",
    "shares_border_with": "{h} shares a border with {t} .",
    "award_received": "{h} received the {t} .",
    "participant_in": "{h} took part in {t} .",
    "discovered": "{h} discovered {t} .",
    "invented": "{h} invented {t} .",
    "created": "{h} painted {t} .",
    "designed": "{h} designed {t} .",
    "spouse": "{h} married {t} .",
    "reached": "{h} reached {t} .",
}
TYPES = {
    "person": "PER",
    "organization": "ORG",
    "university": "ORG",
    "museum": "ORG",
    "award": "MISC",
    "war": "MISC",
    "space mission": "MISC",
    "painting": "MISC",
    "technology": "MISC",
    "protocol": "MISC",
    "language": "MISC",
    "machine": "MISC",
    "building": "MISC",
    "chemical element": "O",
    "mineral": "O",
    "phenomenon": "O",
    "drug": "O",
}  # every other type (city, country, river, sea, ...) is LOC
ARTICLE_TYPES = {"river", "sea", "mountain range", "wetland", "gorge", "valley", "place", "war"}
HANDWRITTEN = {
    "train": [
        "Paris/B-PER carried Helen/B-PER away from Sparta/B-LOC .",
        "Curie/B-PER measured the rays in a shed in Paris/B-LOC .",
        "In Troy/B-LOC , Paris/B-PER was a son of Priam/B-PER .",
    ],
    "dev": [
        "Paris/B-PER was a prince of Troy/B-LOC .",
        "Becquerel/B-PER lent Curie/B-PER a plate from Paris/B-LOC .",
        "Hecuba/B-PER lived in Troy/B-LOC with Priam/B-PER .",
    ],
}


def read_kg() -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str]]]:
    entities = {}
    for line in (KG / "entities.tsv").read_text(encoding="utf-8").splitlines()[2:]:
        ident, name, kind = line.split("\t")[:3]
        entities[ident] = (name, kind)
    triples = []
    for line in (KG / "triples.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            head, relation, tail = line.split("\t")
            triples.append((head, relation, tail))
    return entities, triples


def mention(entities: dict[str, tuple[str, str]], ident: str) -> list[tuple[str, str]]:
    """``(word, tag)`` of an entity's name, with "the" before rivers, seas, wars ..."""
    name, kind = entities[ident]
    label = TYPES.get(kind, "LOC")
    words = name.split()
    tokens = [("the", "O")] if kind in ARTICLE_TYPES else []
    for i, word in enumerate(words):
        tokens.append((word, "O" if label == "O" else f"{'B' if i == 0 else 'I'}-{label}"))
    return tokens


def sentence(entities: dict[str, tuple[str, str]], head: str, relation: str, tail: str):
    tokens: list[tuple[str, str]] = []
    for part in re.split(r"(\{h\}|\{t\})", TEMPLATES[relation]):
        if part == "{h}":
            tokens += mention(entities, head)
        elif part == "{t}":
            tokens += mention(entities, tail)
        else:
            tokens += [(word, "O") for word in part.split()]
    if tokens[0][0] == "the":
        tokens[0] = ("The", "O")
    return tokens


def main() -> None:
    entities, triples = read_kg()
    documents: dict[str, dict[str, list[list[tuple[str, str]]]]] = {"train": {}, "dev": {}}
    for i, (head, relation, tail) in enumerate(triples):
        if relation in TEMPLATES:
            split = "dev" if i % 4 == 3 else "train"
            documents[split].setdefault(head, []).append(sentence(entities, head, relation, tail))
    for split, written in HANDWRITTEN.items():
        documents[split]["handwritten"] = [
            [tuple(token.split("/")) if "/" in token else (token, "O") for token in s.split()]
            for s in written
        ]
    for split, docs in documents.items():
        lines = []
        for sentences in docs.values():
            lines += ["-DOCSTART- -X- -X- O", ""]
            for tokens in sentences:
                lines += [f"{word} -X- -X- {tag}" for word, tag in tokens] + [""]
        (HERE / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
