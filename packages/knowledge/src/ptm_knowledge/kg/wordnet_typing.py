"""WordNet entity typing with held-out entities: which lexicographer file is a noun in?

Each row is a sentence that mentions one noun synset (an *entity* of the WordNet KG,
:func:`~ptm_knowledge.kg.wordnet.write_wordnet_kg`) by one of its lemmas; the label is the
synset's lexname (``noun.animal``, ``noun.artifact``, ...). Sentences are the synset's own
usage examples that contain the lemma, else neutral templates ("We argued about {} for an
hour."). The dev and test entities never occur in training: their synsets are not train
synsets, and none of their lemmas is a word of any train sentence. So on dev and test the
words say little beyond the lemma itself, and a model that reads the KG (ERNIE-THU's
entity embeddings, K-BERT's branches) can carry the label from what the KG knows of the
synset.

Kept synsets: their lemma is monosemous among nouns (one noun synset), so the linker's
answer is unambiguous and the label is a property of the surface's one entity; only the
``labels`` most frequent lexnames among those (ties: by name), each with the same number
of entities in every split (balanced labels). Deterministic: the same WordNet files and
arguments give byte-identical files.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ptm_core.atomic import atomic_write_text
from ptm_knowledge.kg.wordnet import Synset, WordNet

SPLITS = ("train", "dev", "test")
HEADER = "label\tsentence\tentity"
# Neutral about the kind of thing: a person, a plant, an act or a tool fits each of them.
TEMPLATES: tuple[str, ...] = (
    "The quiz question was about {}.",
    "She wrote a long essay on {} last winter.",
    "The old book had a whole chapter on {}.",
    "My neighbour keeps talking about {}.",
    "The documentary about {} was shown on Sunday.",
    "We argued about {} for an hour.",
    "He found an old postcard that mentioned {}.",
    "The lecture today was mostly about {}.",
    "A student asked a question about {}.",
    "The newspaper ran a story about {} again.",
    "Nobody at dinner knew much about {}.",
    "Her favourite podcast had an episode on {}.",
)
_WORD = re.compile(r"[\w'-]+")


@dataclass(frozen=True)
class TypedSynset:
    """An entity of the task: its synset id, the lemma its sentences use, its label."""

    entity_id: str
    surface: str
    label: str


@dataclass(frozen=True)
class TypingRow:
    """One task row: the label, the sentence and the entity it mentions."""

    label: str
    sentence: str
    entity_id: str


@dataclass(frozen=True)
class WordNetTyping:
    """The task's rows per split and the lexnames it uses (most frequent first)."""

    labels: tuple[str, ...]
    splits: dict[str, list[TypingRow]]
    entities: dict[str, list[TypedSynset]]

    def write(self, output_dir: str | Path) -> dict[str, Path]:
        """Write ``train.tsv``, ``dev.tsv``, ``test.tsv`` (``label``, ``sentence``,
        ``entity``: GLUE-style, ``configs/task/wordnet_typing.yaml``); returns the paths."""
        output = Path(output_dir)
        output.mkdir(parents=True, exist_ok=True)
        paths = {}
        for split, rows in self.splits.items():
            body = "".join(f"{r.label}\t{r.sentence}\t{r.entity_id}\n" for r in rows)
            paths[split] = atomic_write_text(output / f"{split}.tsv", HEADER + "\n" + body)
        return {k: Path(v) for k, v in paths.items()}


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _lemma_words(surface: str) -> set[str]:
    return _words(surface.replace("_", " "))


def typed_synsets(wordnet: WordNet) -> list[TypedSynset]:
    """Noun synsets with a lemma that names no other noun synset, in file order; the first
    such lemma is the surface (``_`` -> space)."""
    kept = []
    for synset in wordnet:
        if synset.pos != "n":
            continue
        surface = next((lem for lem in synset.lemmas if len(wordnet.senses(lem, "n")) == 1), None)
        if surface is not None and _lemma_words(surface):
            kept.append(TypedSynset(synset.id, surface.replace("_", " "), synset.lexname))
    return kept


def _examples_with(synset: Synset, surface: str) -> list[str]:
    pattern = re.compile(rf"(?<![\w-]){re.escape(surface)}(?![\w-])", re.IGNORECASE)
    return [e[:1].upper() + e[1:] for e in synset.examples if pattern.search(e)]


def build_wordnet_typing(
    wordnet: WordNet,
    *,
    labels: int | Sequence[str] = 6,
    per_label: int | None = None,
    held_out: float = 0.2,
    sentences: int = 4,
    seed: int = 0,
) -> WordNetTyping:
    """The typing task over ``wordnet``'s nouns.

    Args:
        wordnet: :func:`~ptm_knowledge.kg.wordnet.read_wordnet`'s nouns.
        labels: how many of the most frequent lexnames, or the lexnames themselves.
        per_label: entities per label before the split (``None``: as many as the rarest
            label has); train keeps those that share no word with a dev/test lemma, cut to
            the same number for every label.
        held_out: the fraction of each label's entities in dev, and again in test.
        sentences: sentences per entity (its usage examples first, then templates).
        seed: the entity shuffle and template choice.

    Returns:
        :class:`WordNetTyping`; each split has the same number of rows per label.

    Raises:
        ValueError: an unknown lexname, too few entities for a split, or a bad argument
            (one line naming it).
    """
    if not 0 < held_out < 0.5:
        raise ValueError(f"held_out={held_out}: give a fraction in (0, 0.5)")
    if sentences < 1:
        raise ValueError(f"sentences={sentences}: give at least 1 sentence per entity")
    by_label: dict[str, list[TypedSynset]] = defaultdict(list)
    for entity in typed_synsets(wordnet):
        by_label[entity.label].append(entity)
    chosen = _choose_labels(by_label, labels)
    size = min(len(by_label[label]) for label in chosen)
    if per_label is not None:
        if per_label > size:
            raise ValueError(f"per_label={per_label}: the rarest chosen lexname has {size}")
        size = per_label
    n_held = round(size * held_out)
    if n_held < 1 or size - 2 * n_held < 1:
        raise ValueError(
            f"{size} entities per label are too few for train/dev/test at held_out={held_out}"
        )
    rng = random.Random(seed)
    pools = {}
    for label in chosen:
        pool = sorted(by_label[label], key=lambda e: e.entity_id)
        rng.shuffle(pool)
        pools[label] = pool
    held = {label: pool[: 2 * n_held] for label, pool in pools.items()}
    # every lemma of a held-out synset, not only the one its sentences use
    banned = {
        w
        for group in held.values()
        for e in group
        for lemma in wordnet[e.entity_id].lemmas
        for w in _lemma_words(lemma)
    }
    # a train entity must not share a word with a held-out one ("oak" / "oak apple")
    free = {
        label: [e for e in pool[2 * n_held :] if not _lemma_words(e.surface) & banned]
        for label, pool in pools.items()
    }
    n_train = min(size - 2 * n_held, *(len(f) for f in free.values()))
    if n_train < 1:
        raise ValueError("no train entity is left whose lemma shares no word with dev/test")
    entities: dict[str, list[TypedSynset]] = {split: [] for split in SPLITS}
    for label in chosen:
        entities["test"] += held[label][:n_held]
        entities["dev"] += held[label][n_held:]
        entities["train"] += free[label][:n_train]
    splits = {
        split: _rows(
            wordnet, entities[split], sentences, rng, banned if split == "train" else set()
        )
        for split in SPLITS
    }
    return WordNetTyping(labels=tuple(chosen), splits=splits, entities=entities)


def _choose_labels(
    by_label: dict[str, list[TypedSynset]], labels: int | Sequence[str]
) -> list[str]:
    if isinstance(labels, int):
        if labels < 2:
            raise ValueError(f"labels={labels}: give at least 2 lexnames")
        ranked = sorted(by_label, key=lambda name: (-len(by_label[name]), name))
        if len(ranked) < labels:
            raise ValueError(f"labels={labels}: only {len(ranked)} lexnames have entities")
        return ranked[:labels]
    unknown = [name for name in labels if name not in by_label]
    if unknown:
        raise ValueError(
            f"lexname {unknown[0]!r} has no typed entity; choose from {sorted(by_label)}"
        )
    return list(labels)


def _rows(
    wordnet: WordNet,
    entities: Iterable[TypedSynset],
    sentences: int,
    rng: random.Random,
    banned: set[str],
) -> list[TypingRow]:
    """``sentences`` rows per entity; in train, no sentence has a held-out lemma's word."""
    rows = []
    for entity in entities:
        own = _examples_with(wordnet[entity.entity_id], entity.surface)
        chosen = [e for e in own if not (_words(e) & banned)][:sentences]
        templates = [t for t in rng.sample(TEMPLATES, len(TEMPLATES)) if not _words(t) & banned]
        chosen += [t.format(entity.surface) for t in templates[: sentences - len(chosen)]]
        rows += [TypingRow(entity.label, s, entity.entity_id) for s in chosen]
    rng.shuffle(rows)
    return rows
