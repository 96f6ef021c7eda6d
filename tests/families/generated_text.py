"""Generated text for the core families' contract cases: a corpus and a sentence-pair task.

Sentences are drawn from a small seeded grammar (never the bundled samples), so a run's
tokenizer is trained on them (``data.tokenizer=null``).
"""

from __future__ import annotations

import random
from pathlib import Path

PEOPLE = ["anna", "boris", "chen", "dara", "emil", "farah", "goran", "hana"]
PLACES = ["oslo", "lima", "kyoto", "accra", "quito", "perth", "turin", "hanoi"]
VERBS = ["visited", "left", "painted", "studied", "described", "remembered"]


def _sentence(rng: random.Random) -> str:
    return f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(PLACES)} in the {rng.choice(['spring', 'winter', 'night', 'rain'])}."


def write_corpus(directory: Path, *, documents: int = 24, seed: int = 0) -> Path:
    """A text corpus (one sentence a line, a blank line between documents)."""
    rng = random.Random(seed)
    path = directory / "corpus.txt"
    directory.mkdir(parents=True, exist_ok=True)
    docs = ["\n".join(_sentence(rng) for _ in range(rng.randint(3, 6))) for _ in range(documents)]
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def write_pair_task(directory: Path, *, rows: int = 32, seed: int = 1) -> list[str]:
    """A GLUE-format sentence-pair task (label: does sentence 2 name sentence 1's place);
    the ``task.*`` overrides that point at it."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for index in range(rows):
            person, place = rng.choice(PEOPLE), rng.choice(PLACES)
            same = rng.random() < 0.5
            other = place if same else rng.choice([p for p in PLACES if p != place])
            label = "entailment" if same else "not_entailment"
            lines.append(f"{index}\t{person} visited {place}.\t{person} was in {other}.\t{label}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        "task=kg_pair",
        f"task.train={directory / 'train.tsv'}",
        f"task.dev={directory / 'dev.tsv'}",
        "task.max_length=32",
        "task.batch_size=8",
        "trainer.max_steps=2",
        # family_contract.FAST asks for save_every=0, which TrainerConfig refuses (>= 1).
        "trainer.save_every=100",
    ]


def text_overrides(tmp_path: Path, experiment: str, *, steps: int = 2) -> list[str]:
    """A tiny pre-training of ``experiment`` on a generated corpus."""
    corpus = write_corpus(tmp_path / "corpus")
    return [
        f"experiment={experiment}",
        f"data.corpus={corpus}",
        "data.tokenizer=null",
        "data.vocab_size=120",
        "data.max_length=32",
        "data.batch_size=4",
        f"data.cache_dir={tmp_path / 'cache'}",
        f"trainer.max_steps={steps}",
        "trainer.save_every=100",  # see write_pair_task
        f"trainer.output_dir={tmp_path / 'run'}",
    ]


# Labelled reviews for SentiLARE (family sentilr): the grammar's names and places with real
# English sentiment words (VADER rates them) and negation, so word polarity alone is not
# the label.
GOOD = ["lovely", "great", "charming", "delightful", "pleasant"]
BAD = ["awful", "gloomy", "dreadful", "miserable", "nasty"]


def _review_sentence(rng: random.Random, positive: bool) -> str:
    place, person = rng.choice(PLACES), rng.choice(PEOPLE)
    if rng.random() < 0.3:  # negated: "not awful" praises
        word = rng.choice(BAD if positive else GOOD)
        return f"{person} said {place} was not {word}."
    return f"{person} found {place} {rng.choice(GOOD if positive else BAD)}."


def write_reviews(directory: Path, *, reviews: int = 60, seed: int = 2) -> Path:
    """A labelled ``reviews.jsonl`` (``text``, ``label`` good/bad) of 2-4 sentences each."""
    import json

    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for _ in range(reviews):
        positive = rng.random() < 0.5
        text = " ".join(_review_sentence(rng, positive) for _ in range(rng.randint(2, 4)))
        rows.append(json.dumps({"text": text, "label": "good" if positive else "bad"}))
    path = directory / "reviews.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def write_review_task(directory: Path, *, rows: int = 32, seed: int = 3) -> list[str]:
    """A GLUE-format single-sentence sentiment task on the same grammar; its overrides."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        lines = ["sentence\tlabel"]
        for _ in range(rows):
            positive = rng.random() < 0.5
            lines.append(f"{_review_sentence(rng, positive)}\t{int(positive)}")
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [
        "task=sentiment",
        f"task.train={directory / 'train.tsv'}",
        f"task.dev={directory / 'dev.tsv'}",
        "task.max_length=32",
        "task.batch_size=8",
    ]
