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


def write_parallel(directory: Path, pairs: int = 64, seed: int = 0) -> Path:
    """``en-de.tsv`` of generated clauses; the "German" side spells each word backwards and
    reverses the word order, so the decoder must attend to the source."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for _ in range(pairs):
        source = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ."
        target = " ".join(word[::-1] for word in reversed(source.split()))
        lines.append(f"{source}\t{target}")
    path = directory / "en-de.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def write_vector_table(directory: Path, dim: int = 8, seed: int = 0) -> Path:
    """A random vector table (the format GloVe's ``final/`` has) over every generated word."""
    import torch

    from ptm_core.data.vector_table import VectorTable

    words = sorted(
        {w for phrase in SUBJECTS + VERBS + OBJECTS + GOOD + BAD for w in phrase.split()}
        | {".", "was"}
    )
    generator = torch.Generator().manual_seed(seed)
    VectorTable(words, torch.randn(len(words), dim, generator=generator), "glove").save(directory)
    return directory
