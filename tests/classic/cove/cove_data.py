"""Generated data for the CoVe tests: parallel pairs, a vector table, a tiny trained folder."""

from __future__ import annotations

import random
from pathlib import Path

import torch

NOUNS = ["cat", "dog", "bird", "river", "house", "road", "song", "bread"]
VERBS = ["sees", "likes", "finds", "hears"]


def write_pairs(directory: Path, pairs: int = 96, seed: int = 0) -> Path:
    """``en-de.tsv``: "the X V the Y ." -> the words spelt backwards, in reverse order."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for _ in range(pairs):
        source = f"the {rng.choice(NOUNS)} {rng.choice(VERBS)} the {rng.choice(NOUNS)} ."
        lines.append(source + "\t" + " ".join(w[::-1] for w in reversed(source.split())))
    (directory / "en-de.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def write_table(directory: Path, dim: int = 8, seed: int = 0) -> Path:
    """A random GloVe-format vector table over the generated words."""
    from ptm_core.data.vector_table import VectorTable

    words = sorted(set(NOUNS + VERBS + ["the", ".", "was", "good", "bad"]))
    generator = torch.Generator().manual_seed(seed)
    VectorTable(words, torch.randn(len(words), dim, generator=generator), "glove").save(directory)
    return directory


def write_sentiment(directory: Path, rows: int = 40, seed: int = 0) -> tuple[Path, Path]:
    """GLUE ``train.tsv``/``dev.tsv``: "the X was good/bad ." labelled by the last word."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for split in ("train", "dev"):
        lines = ["sentence\tlabel"]
        for _ in range(rows):
            label = rng.randint(0, 1)
            lines.append(f"the {rng.choice(NOUNS)} was {'good' if label else 'bad'} .\t{label}")
        path = directory / f"{split}.tsv"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        out.append(path)
    return out[0], out[1]


def write_tagging(directory: Path, rows: int = 30, seed: int = 0) -> tuple[Path, Path]:
    """CoNLL ``train.txt``/``dev.txt``: nouns after "the" are B-ANIMAL or B-THING."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    animals = {"cat", "dog", "bird"}
    out = []
    for split in ("train", "dev"):
        blocks = []
        for _ in range(rows):
            words = ["the", rng.choice(NOUNS), rng.choice(VERBS), "the", rng.choice(NOUNS), "."]
            tags = [
                ("B-ANIMAL" if w in animals else "B-THING") if w in NOUNS else "O" for w in words
            ]
            blocks.append("\n".join(f"{w} {t}" for w, t in zip(words, tags, strict=True)))
        path = directory / f"{split}.txt"
        path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
        out.append(path)
    return out[0], out[1]


def pretrain_args(tmp_path: Path, steps: int = 3) -> list[str]:
    """``ptm pretrain`` arguments of a tiny CoVe run on generated data."""
    return [
        "pretrain",
        "experiment=cove_tiny",
        f"data.parallel={write_pairs(tmp_path / 'pairs')}",
        f"data.glove={write_table(tmp_path / 'glove')}",
        "data.target_langs=[de]",
        "data.heldout=null",
        "data.batch_size=16",
        "model.hidden_size=16",
        "model.target_embedding_dim=8",
        "model.dropout=0.0",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        "trainer.log_every=1",
        "trainer.warmup_ratio=0.0",
        "trainer.learning_rate=0.01",
        "trainer.progress=false",
        f"trainer.output_dir={tmp_path / 'cove'}",
    ]
