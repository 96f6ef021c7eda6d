"""A generated corpus with planted co-occurrence structure, shared by the static tests."""

from __future__ import annotations

import random

TOPICS = {
    "fruit": ["apple", "pear", "plum", "grape", "melon"],
    "tools": ["hammer", "saw", "drill", "wrench", "chisel"],
    "birds": ["robin", "crow", "finch", "heron", "swan"],
    "metal": ["iron", "zinc", "tin", "lead", "nickel"],
}


def planted_corpus(sentences: int = 300, length: int = 8, seed: int = 0) -> list[list[str]]:
    """Sentences of ``length`` words drawn from one topic each: a word's neighbours are its
    topic's other words."""
    rng = random.Random(seed)
    groups = list(TOPICS.values())
    return [rng.choices(rng.choice(groups), k=length) for _ in range(sentences)]


def topic_of(word: str) -> str:
    return next(name for name, words in TOPICS.items() if word in words)
