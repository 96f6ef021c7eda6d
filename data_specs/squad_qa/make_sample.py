"""Regenerate the SQuAD sample (CC0): ``python data_specs/squad_qa/make_sample.py``.

One paragraph per subject of the sample KG (``../knowledge_graph/sample``): its description
from ``entities.tsv``, then one sentence per fact. One question per fact whose relation
has a single object for that subject ("Where did Wolfgang Amadeus Mozart die?" is asked of
a paragraph that also says where he was born and lived, so the place must be bound to its
verb). Every third subject goes to dev. The v2.0 files add, per paragraph, one question
about a fact the paragraph does not state (``is_impossible``), asked with the same
templates and often about a place that the paragraph does name.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
KG = HERE.parent / "knowledge_graph" / "sample"

# relation -> (sentence, question); {h} subject, {t} object
FACTS = {
    "born_in": ("{h} was born in {t}.", "Where was {h} born?"),
    "died_in": ("{h} died in {t}.", "Where did {h} die?"),
    "lived_in": ("For some years {h} lived in {t}.", "Where did {h} live?"),
    "worked_at": ("Later {h} worked at {t}.", "Where did {h} work?"),
    "educated_at": ("{h} studied at {t}.", "Where did {h} study?"),
    "citizen_of": ("{h} was a citizen of {t}.", "Of which country was {h} a citizen?"),
    "spouse": ("{h} married {t}.", "Whom did {h} marry?"),
    "discovered": ("{h} discovered {t}.", "What did {h} discover?"),
    "award_received": ("{h} received the {t}.", "Which prize did {h} receive?"),
    "participant_in": ("{h} took part in {t}.", "In what did {h} take part?"),
    "invented": ("{h} invented {t}.", "What did {h} invent?"),
    "created": ("{h} painted {t}.", "What did {h} paint?"),
    "designed": ("{h} designed {t}.", "What did {h} design?"),
    "reached": ("{h} reached {t}.", "What did {h} reach?"),
    "capital_of": ("{h} is the capital of {t}.", "Of which country is {h} the capital?"),
    "located_in": ("{h} lies in {t}.", "Where does {h} lie?"),
    "source": ("{h} rises in {t}.", "Where does {h} rise?"),
    "mouth": ("{h} flows into {t}.", "Into which sea does {h} flow?"),
    "flows_through": ("{h} flows through {t}.", "Through which country does {h} flow?"),
}
ARTICLE_TYPES = {"river", "sea", "mountain range", "wetland", "gorge", "valley", "place", "war"}
# Unanswerable questions (v2.0) are drawn from these, for a subject that lacks the fact.
IMPOSSIBLE = ("died_in", "born_in", "educated_at", "worked_at", "capital_of", "mouth")


def read_kg() -> tuple[dict[str, tuple[str, str, str]], list[tuple[str, str, str]]]:
    entities = {}
    for line in (KG / "entities.tsv").read_text(encoding="utf-8").splitlines()[2:]:
        ident, name, kind, _aliases, description = line.split("\t")
        entities[ident] = (name, kind, description)
    triples = []
    for line in (KG / "triples.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            head, relation, tail = line.split("\t")
            triples.append((head, relation, tail))
    return entities, triples


def name(entities: dict[str, tuple[str, str, str]], ident: str, start: bool = False) -> str:
    text, kind, _ = entities[ident]
    if kind in ARTICLE_TYPES:
        return f"{'The' if start else 'the'} {text}"
    return text


def paragraph(entities, head: str, facts: list[tuple[str, str]], with_impossible: bool):
    """The paragraph of one subject and its questions (SQuAD layout)."""
    subject_name, _kind, description = entities[head]
    context = f"About {subject_name}: {description}"
    answers: dict[str, list[tuple[str, int]]] = {}
    for relation, tail in facts:
        sentence, _ = FACTS[relation]
        before, after = sentence.split("{t}")
        prefix = before.replace("{h}", name(entities, head, start=before.startswith("{h}")))
        tail_text = entities[tail][0]
        tail_start = len(context) + 1 + len(prefix)
        if entities[tail][1] in ARTICLE_TYPES and not prefix.endswith("the "):
            prefix += "the "
            tail_start += 4
        context += " " + prefix + tail_text + after.replace("{h}", subject_name)
        assert context[tail_start : tail_start + len(tail_text)] == tail_text
        answers.setdefault(relation, []).append((tail_text, tail_start))
    qas = []
    for relation, found in answers.items():
        if len(found) != 1:
            continue  # several objects ("flows through Germany, Austria, ..."): ambiguous
        question = FACTS[relation][1].format(h=name(entities, head))
        text, start = found[0]
        qas.append(
            {
                "id": f"{head}-{relation}",
                "question": question,
                "answers": [{"text": text, "answer_start": start}],
                **({"is_impossible": False} if with_impossible else {}),
            }
        )
    if with_impossible:
        missing = next((r for r in IMPOSSIBLE if r not in answers), None)
        if missing is not None:
            qas.append(
                {
                    "id": f"{head}-{missing}-none",
                    "question": FACTS[missing][1].format(h=name(entities, head)),
                    "answers": [],
                    "is_impossible": True,
                }
            )
    return {"context": context, "qas": qas}


def main() -> None:
    entities, triples = read_kg()
    facts: dict[str, list[tuple[str, str]]] = {}
    for head, relation, tail in triples:
        if relation in FACTS:
            facts.setdefault(head, []).append((relation, tail))
    subjects = [head for head, items in facts.items() if len(items) >= 2]
    splits = {
        "train": [h for i, h in enumerate(subjects) if i % 3 != 2],
        "dev": [h for i, h in enumerate(subjects) if i % 3 == 2],
    }
    for version, with_impossible in (("1.1", False), ("2.0", True)):
        for split, heads in splits.items():
            data = [
                {
                    "title": entities[head][0],
                    "paragraphs": [paragraph(entities, head, facts[head], with_impossible)],
                }
                for head in heads
            ]
            data = [a for a in data if a["paragraphs"][0]["qas"]]
            document = {"version": f"v{version}-ptm-sample", "data": data}
            text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
            (HERE / f"{split}-v{version}.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
