"""Regenerate the GLUE-style sample (CC0): ``python data_specs/glue_classification/make_sample.py``.

``train.tsv``/``dev.tsv`` (sentence pairs, RTE layout): does sentence 2 follow from
sentence 1? Sentence 1 states two facts of the sample KG about one entity ("Mozart was born
in Salzburg and died in Vienna."); sentence 2 restates one of them, or binds its relation to
the other fact's object ("Mozart died in Salzburg."); or it states one fact about two
people ("Ada Lovelace was born in London, while Alan Turing ...") and sentence 2 swaps
them. Both hypotheses use only words of the
premise, so word overlap cannot tell them apart: a model must bind each place to its verb.
Dev entities never occur as the subject of a train pair.

``single_train.tsv``/``single_dev.tsv`` (single sentences, SST-2 layout): is a visitor's
remark positive (1) or negative (0)? Half the sentences negate the adjective ("was not
boring"), so the adjective alone is right only half the time.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
KG = HERE.parent / "knowledge_graph" / "sample"

# relation -> verb phrase (people in the past tense, places in the present)
PHRASES = {
    "born_in": "was born in",
    "died_in": "died in",
    "lived_in": "lived in",
    "educated_at": "studied at",
    "worked_at": "worked at",
    "citizen_of": "was a citizen of",
    "capital_of": "is the capital of",
    "located_in": "lies in",
    "source": "rises in",
    "mouth": "flows into",
    "flows_through": "flows through",
    "reached": "reached",
}
ARTICLE_TYPES = {"river", "sea", "mountain range", "wetland", "gorge", "valley", "forest", "place"}
DEV_SUBJECTS = {
    "mozart",
    "pierre_curie",
    "isaac_newton",
    "danube",
    "budapest",
    "antoni_gaudi",
    "alexander_fleming",
    "ada_lovelace",
    "white_nile",
    "belgrade",
}


def read_kg() -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str]]]:
    """``{id: (name, type)}`` and the triples of the sample KG, in file order."""
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


def phrase(entities: dict[str, tuple[str, str]], ident: str, start: bool = False) -> str:
    name, kind = entities[ident]
    if kind in ARTICLE_TYPES:
        return f"{'The' if start else 'the'} {name}"
    return name


def two_subject_rows(subjects: set[str] | None, exclude: set[str]) -> list[tuple[str, str, str]]:
    """ "A was born in X, while B was born in Y." against "B was born in X." (and the like)."""
    entities, triples = read_kg()
    rows = []
    for relation in ("born_in", "died_in", "worked_at"):
        facts = [
            (h, t)
            for h, r, t in triples
            if r == relation and (subjects is None or h in subjects) and h not in exclude
        ]
        for (a, x), (b, y) in zip(facts, facts[1:] + facts[:1], strict=True):
            if a == b or x == y:
                continue
            verb = PHRASES[relation]
            name_a, name_b = phrase(entities, a, True), phrase(entities, b, True)
            place_x, place_y = phrase(entities, x), phrase(entities, y)
            premise = f"{name_a} {verb} {place_x}, while {name_b} {verb} {place_y}."
            rows += [
                (premise, f"{name_b} {verb} {place_y}.", "entailment"),
                (premise, f"{name_b} {verb} {place_x}.", "not_entailment"),
                (premise, f"{name_a} {verb} {place_x}.", "entailment"),
                (premise, f"{name_a} {verb} {place_y}.", "not_entailment"),
            ]
    return rows


def pair_rows(subjects: set[str] | None, exclude: set[str]) -> list[tuple[str, str, str]]:
    entities, triples = read_kg()
    known = set(triples)
    linked = {(h, t) for h, _, t in triples} | {(t, h) for h, _, t in triples}
    facts: dict[str, list[tuple[str, str]]] = {}
    for head, relation, tail in triples:
        if relation in PHRASES and (subjects is None or head in subjects) and head not in exclude:
            facts.setdefault(head, []).append((relation, tail))
    rows = []
    for head, items in facts.items():
        subject = phrase(entities, head, start=True)
        used = 0
        for i, (r1, t1) in enumerate(items):
            for r2, t2 in items[i + 1 :]:
                if r1 == r2 or t1 == t2 or used >= 2:
                    continue
                if (head, r2, t1) in known or (head, r1, t2) in known or (t1, t2) in linked:
                    continue  # a swapped hypothesis would be true (in the KG): leave it out
                used += 1
                a, b = phrase(entities, t1), phrase(entities, t2)
                premise = f"{subject} {PHRASES[r1]} {a} and {PHRASES[r2]} {b}."
                if used % 2 == 0:
                    premise = f"{subject} {PHRASES[r2]} {b} and {PHRASES[r1]} {a}."
                rows += [
                    (premise, f"{subject} {PHRASES[r2]} {b}.", "entailment"),
                    (premise, f"{subject} {PHRASES[r2]} {a}.", "not_entailment"),
                    (premise, f"{subject} {PHRASES[r1]} {a}.", "entailment"),
                    (premise, f"{subject} {PHRASES[r1]} {b}.", "not_entailment"),
                ]
    return rows


SINGLE_TEMPLATES = [
    "The guided tour of {} was {}.",
    "Our afternoon in {} was {}.",
    "Honestly, the trip to {} was {}.",
    "The evening concert in {} was {}.",
    "The long walk through {} was {}.",
]
POSITIVE = ["wonderful", "delightful", "charming", "memorable", "excellent"]
NEGATIVE = ["boring", "dreadful", "disappointing", "tiring", "dull"]
TRAIN_PLACES = ["Paris", "Vienna", "Warsaw", "Athens", "London", "Geneva", "Oxford", "Kyoto"]
DEV_PLACES = ["Budapest", "Belgrade", "Salzburg", "Florence", "Barcelona"]


def single_rows(places: list[str], templates: list[str]) -> list[tuple[str, str]]:
    rows = []
    for p, place in enumerate(places):
        for t, template in enumerate(templates):
            k = p * len(templates) + t
            positive = k % 2 == 0
            negated = (k // 2) % 2 == 1
            words = POSITIVE if positive != negated else NEGATIVE
            adjective = words[k % len(words)]
            text = template.format(place, f"not {adjective}" if negated else adjective)
            rows.append((text, "1" if positive else "0"))
    return rows


def main() -> None:
    train = pair_rows(None, DEV_SUBJECTS) + two_subject_rows(None, DEV_SUBJECTS)
    dev = pair_rows(DEV_SUBJECTS, set()) + two_subject_rows(DEV_SUBJECTS, set())
    for name, rows in (("train", train), ("dev", dev)):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        lines += [f"{i}\t{a}\t{b}\t{label}" for i, (a, b, label) in enumerate(rows)]
        (HERE / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    singles = (
        ("single_train", single_rows(TRAIN_PLACES, SINGLE_TEMPLATES)),
        ("single_dev", single_rows(DEV_PLACES, SINGLE_TEMPLATES[1:] + SINGLE_TEMPLATES[:1])),
    )
    for name, rows in singles:
        lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in rows)]
        (HERE / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
