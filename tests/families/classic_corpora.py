"""Generated corpora and tasks for ptm-classic's contract cases (never the bundled samples)."""

from __future__ import annotations

import random
from pathlib import Path

SUBJECTS = ["the cat", "a dog", "my friend", "the river", "an old man", "the city", "a bird"]
VERBS = ["saw", "liked", "crossed", "found", "left", "painted", "heard"]
OBJECTS = ["the bridge", "a red house", "the long road", "some bread", "the music", "a song"]
GOOD = ["good", "fine", "lovely", "great"]
BAD = ["bad", "awful", "poor", "dull"]


def write_corpus(directory: Path, sentences: int = 240, seed: int = 0) -> Path:
    """A text corpus of ``sentences`` random clauses, one document per 8 lines."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(sentences):
        lines.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} .")
        if i % 8 == 7:
            lines.append("")
    path = directory / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_sentiment_task(directory: Path, rows: int = 48, seed: int = 0) -> tuple[Path, Path]:
    """GLUE-format ``train.tsv``/``dev.tsv`` whose label is the polarity of the last word."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for split in ("train", "dev"):
        out = ["sentence\tlabel"]
        for _ in range(rows):
            label = rng.randint(0, 1)
            word = rng.choice(GOOD if label else BAD)
            out.append(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} was {word} .\t{label}")
        path = directory / f"{split}.tsv"
        path.write_text("\n".join(out) + "\n", encoding="utf-8")
        paths.append(path)
    return paths[0], paths[1]
