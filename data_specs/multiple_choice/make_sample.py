"""Regenerate the multiple-choice sample (CC0): ``python data_specs/multiple_choice/make_sample.py``.

SWAG layout: ``sent1`` states two facts of the sample KG (``../knowledge_graph/sample``),
``sent2`` starts a sentence about one of them, and the four endings are the right place,
the other place of ``sent1`` and two other places of the KG. The wrong ending that also
occurs in ``sent1`` defeats word overlap: a model must bind each place to its verb or its
subject. Dev subjects never occur in train.
"""

from __future__ import annotations

import csv
import io
import itertools
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
KG = HERE.parent / "knowledge_graph" / "sample"

PHRASES = {
    "born_in": "was born in",
    "died_in": "died in",
    "lived_in": "lived in",
    "educated_at": "studied at",
    "worked_at": "worked at",
    "capital_of": "is the capital of",
    "citizen_of": "was a citizen of",
    "located_in": "lies in",
    "source": "rises in",
    "mouth": "flows into",
}
ARTICLE_TYPES = {"river", "sea", "mountain range", "wetland", "gorge", "valley", "place"}
PLACE_TYPES = {"city", "country", "region", "university", "organization", "sea", "mountain range"}
DEV_SUBJECTS = {
    "mozart",
    "pierre_curie",
    "isaac_newton",
    "danube",
    "antoni_gaudi",
    "alexander_fleming",
    "ada_lovelace",
    "vienna",
    "belgrade",
    "khartoum",
}
COLUMNS = [
    "video-id",
    "fold-ind",
    "startphrase",
    "sent1",
    "sent2",
    "gold-source",
    "ending0",
    "ending1",
    "ending2",
    "ending3",
    "label",
]


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


def name(entities: dict[str, tuple[str, str]], ident: str, start: bool = False) -> str:
    text, kind = entities[ident]
    if kind in ARTICLE_TYPES:
        return f"{'The' if start else 'the'} {text}"
    return text


def items(subjects: set[str] | None, exclude: set[str], rng: random.Random) -> list[list[str]]:
    """``(sent1, sent2, right, other)`` problems, then four shuffled endings and the label."""
    entities, triples = read_kg()
    places = sorted({t for _, r, t in triples if r in PHRASES and entities[t][1] in PLACE_TYPES})
    linked = {(h, t) for h, _, t in triples} | {(t, h) for h, _, t in triples}
    facts: dict[str, list[tuple[str, str]]] = {}
    by_relation: dict[str, list[tuple[str, str]]] = {}
    for head, relation, tail in triples:
        if relation in PHRASES and (subjects is None or head in subjects) and head not in exclude:
            facts.setdefault(head, []).append((relation, tail))
            by_relation.setdefault(relation, []).append((head, tail))
    problems = []
    for head, known in facts.items():  # one subject, two facts
        subject = name(entities, head, True)
        for i, (r1, t1) in enumerate(known):
            for r2, t2 in known[i + 1 :]:
                if r1 == r2 or t1 == t2 or (t1, t2) in linked:
                    continue  # "lies in Vienna and in Austria" would make both endings right
                sent1 = f"{subject} {PHRASES[r1]} {name(entities, t1)} and {PHRASES[r2]} {name(entities, t2)}."
                problems.append((sent1, f"{subject} {PHRASES[r2]}", t2, t1))
                problems.append((sent1, f"{subject} {PHRASES[r1]}", t1, t2))
    for relation, pairs in by_relation.items():  # two subjects, one relation
        for (a, x), (b, y) in itertools.pairwise(pairs):
            if a == b or x == y or (x, y) in linked or (b, x) in linked:
                continue  # the other place would be right too ("... lies in Paris / France")
            verb = PHRASES[relation]
            sent1 = f"{name(entities, a, True)} {verb} {name(entities, x)}, while {name(entities, b)} {verb} {name(entities, y)}."
            problems.append((sent1, f"{name(entities, b, True)} {verb}", y, x))
    rows = []
    for sent1, sent2, right, other in problems:
        distractors = [p for p in places if p not in (right, other)]
        choices = [right, other, *rng.sample(distractors, 2)]
        rng.shuffle(choices)
        endings = [f"{name(entities, c)}." for c in choices]
        rows.append([sent1, sent2, *endings, str(choices.index(right))])
    return rows


def main() -> None:
    rng = random.Random(20240615)
    splits = {
        "train": items(None, DEV_SUBJECTS, rng),
        "dev": items(DEV_SUBJECTS, set(), rng),
    }
    for split, rows in splits.items():
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        for k, (sent1, sent2, *endings, label) in enumerate(rows):
            writer.writerow(
                ["ptm-sample", k, f"{sent1} {sent2}", sent1, sent2, "gold", *endings, label]
            )
        (HERE / f"{split}.csv").write_text(out.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    main()
