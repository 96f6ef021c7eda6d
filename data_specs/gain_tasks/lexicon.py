"""The words of the pre-training-gain suite and their split (read by make_corpus/make_sample).

Every target word is a nonce word (``kelumor``, ``dastiven``): made from syllables by a seeded
generator, so it means nothing until a corpus gives it a meaning. Three kinds:

* person names and place names (the tagging and QA tasks);
* positive and negative "adjectives" (the classification task).

Each kind is split in two halves: ``train`` words may appear in the fine-tuning training
sets; ``heldout`` words appear only in the dev sets. Both halves appear, equally often, in
the pre-training corpus (``make_corpus.py``), in contexts that show their kind. A model that
has not read that corpus has no way to tell a held-out person from a held-out place.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE_VOCAB = HERE.parent / "text_corpus" / "sample-vocab.txt"
SEED = 20240515
PER_KIND = 48  # words of each kind; half train, half held out

ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "tr"]
NUCLEI = ["a", "e", "i", "o", "u", "ai", "ou"]
CODAS = ["", "", "", "n", "r", "l", "s", "m"]


@dataclass(frozen=True)
class Lexicon:
    """Nonce words by kind, each split into fine-tuning ``train`` and ``heldout`` halves.

    Attributes:
        words: ``{kind: {"train": [...], "heldout": [...]}}``; kinds ``person``, ``place``,
            ``positive``, ``negative``.
    """

    words: dict[str, dict[str, list[str]]]

    def all(self, kind: str) -> list[str]:
        """Both halves of one kind, train first."""
        return self.words[kind]["train"] + self.words[kind]["heldout"]

    def split(self, half: str) -> dict[str, list[str]]:
        """``{kind: words}`` of one half (``train`` or ``heldout``)."""
        return {kind: halves[half] for kind, halves in self.words.items()}


def _nonce(rng: random.Random, syllables: int) -> str:
    parts = [rng.choice(ONSETS) + rng.choice(NUCLEI) for _ in range(syllables)]
    return "".join(parts) + rng.choice(CODAS)


def build_lexicon(seed: int = SEED, per_kind: int = PER_KIND) -> Lexicon:
    """The nonce words, deterministic in ``seed``; none is a token of the sample vocabulary."""
    rng = random.Random(seed)
    taken = set(SAMPLE_VOCAB.read_text(encoding="utf-8").split())
    words: dict[str, dict[str, list[str]]] = {}
    for kind in ("person", "place", "positive", "negative"):
        chosen: list[str] = []
        while len(chosen) < per_kind:
            word = _nonce(rng, rng.choice((2, 3)))
            if len(word) >= 5 and word not in taken:
                taken.add(word)
                chosen.append(word)
        half = per_kind // 2
        words[kind] = {"train": chosen[:half], "heldout": chosen[half:]}
    return Lexicon(words)


def write_vocab(path: Path, words: set[str]) -> int:
    """The sample vocabulary plus every word in ``words`` it lacks, one token each.

    WordPiece matches the longest vocabulary entry first, so a whole word in the vocabulary
    is always one token. Returns the vocabulary size.
    """
    vocab = SAMPLE_VOCAB.read_text(encoding="utf-8").split("\n")
    vocab = [token for token in vocab if token]
    known = set(vocab)
    vocab += sorted(w for w in words if w not in known)
    path.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return len(vocab)
