"""A WN18RR-style link-prediction benchmark built from the WordNet 3.0 database files.

WN18 (Bordes et al., 2013) kept the WordNet synsets that take part in many relation
triples, over 18 relations; WN18RR (Dettmers et al., 2018) removed from it the 7 relations
that are the inverse of another (``_hyponym`` of ``_hypernym``, ...), because a test triple
whose inverse is in training is answered by a lookup. What is done here, step by step:

1. Triples: every WordNet pointer whose relation is one of WN18's 18, between two synsets
   (lexical pointers lifted to their synsets), each distinct triple once.
2. Entities (WN18's selection, approximated): synsets in at least ``min_triples`` of those
   triples as head or tail (5 by default, the value whose counts come closest to WN18's;
   the original filter is described only loosely), that keep at least one triple to another
   kept synset.
3. Triples between kept entities with one of WN18RR's 11 relations.
4. Split, deterministic for a seed: all triples between the same two entities (in either
   direction, any relation: a symmetric ``_derivationally_related_form`` pair, an
   ``_also_see`` and its reverse) form one group, and a group goes to one split whole. Groups
   are visited in the order of a keyed hash (BLAKE2b of seed and the two ids); a group goes
   to test, else valid, while that split is below its size and both of its entities keep a
   triple in train. So no valid/test entity is unseen in train, and no test triple's
   reverse or inverse twin is in train (WN18RR itself still has such pairs through its
   symmetric relations).

User guide with the counts against WN18RR's: ``docs/knowledge/wordnet.md``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ptm_core.atomic import atomic_write_text
from ptm_knowledge.kg.wordnet import (
    WordNet,
    wordnet_triples,
    write_entities_file,
    write_triples_file,
)

__all__ = [
    "GROUPINGS",
    "INVERSE_OF",
    "WN18RR_PUBLISHED",
    "WN18RR_RELATIONS",
    "WN18_RELATIONS",
    "Split",
    "WN18RRStyle",
    "build_wn18rr_style",
    "split_triples",
    "wn18_entities",
    "write_wn18rr_style",
]

#: WN18RR's 11 relations (pointer relation names; the KG writes them as ``_hypernym``...).
WN18RR_RELATIONS = (
    "hypernym",
    "derivationally_related_form",
    "instance_hypernym",
    "also_see",
    "member_meronym",
    "synset_domain_topic_of",
    "has_part",
    "member_of_domain_usage",
    "member_of_domain_region",
    "verb_group",
    "similar_to",
)
#: The 7 relations of WN18 that WN18RR removed, each with the relation it inverts.
INVERSE_OF = {
    "hyponym": "hypernym",
    "instance_hyponym": "instance_hypernym",
    "member_holonym": "member_meronym",
    "part_of": "has_part",
    "member_of_domain_topic": "synset_domain_topic_of",
    "synset_domain_usage_of": "member_of_domain_usage",
    "synset_domain_region_of": "member_of_domain_region",
}
WN18_RELATIONS = (*WN18RR_RELATIONS, *INVERSE_OF)
#: WN18RR's published sizes (Dettmers et al., 2018), for comparison.
WN18RR_PUBLISHED = {"entities": 40_943, "train": 86_835, "valid": 3_034, "test": 3_134}
_TOTAL = WN18RR_PUBLISHED["train"] + WN18RR_PUBLISHED["valid"] + WN18RR_PUBLISHED["test"]

Triple = tuple[str, str, str]
#: How :func:`split_triples` groups triples: all triples of an entity pair, or each alone.
GROUPINGS = ("pair", "triple")


@dataclass
class Split:
    """Triples divided into train, valid and test (each in the original triple order)."""

    train: list[Triple] = field(default_factory=list)
    valid: list[Triple] = field(default_factory=list)
    test: list[Triple] = field(default_factory=list)


@dataclass(frozen=True)
class WN18RRStyle:
    """What :func:`build_wn18rr_style` made (and :func:`write_wn18rr_style` wrote).

    Args:
        entities: the kept synset ids, in WordNet's file order.
        split: the train/valid/test triples.
        settings: ``seed``, ``min_triples``, sizes: what reproduces it.
    """

    entities: list[str]
    split: Split
    settings: dict[str, int | str]

    def summary(self) -> dict[str, object]:
        """Counts (entities, triples per split and per relation) and WN18RR's published."""
        every = [*self.split.train, *self.split.valid, *self.split.test]
        return {
            "entities": len(self.entities),
            "train": len(self.split.train),
            "valid": len(self.split.valid),
            "test": len(self.split.test),
            "relations": dict(Counter(r for _, r, _ in every).most_common()),
            "settings": self.settings,
            "wn18rr_published": WN18RR_PUBLISHED,
        }


def wn18_entities(wordnet: WordNet, min_triples: int = 5) -> list[str]:
    """WN18's entity selection (step 2 of the module's description), in file order."""
    if min_triples < 1:
        raise ValueError(f"min_triples must be >= 1, got {min_triples}")
    triples = wordnet_triples(wordnet, relations=WN18_RELATIONS)
    degree: Counter[str] = Counter()
    for head, _, tail in triples:
        degree[head] += 1
        degree[tail] += 1
    often = {s for s, count in degree.items() if count >= min_triples}
    linked = {e for h, _, t in triples if h in often and t in often for e in (h, t)}
    return [s for s in wordnet.synsets if s in linked]


def _group_key(seed: int, a: str, b: str, relation: str = "") -> bytes:
    # "" (pair grouping) hashes exactly as before the grouping option: same pair splits.
    text = f"{a}\t{b}\t{relation}" if relation else f"{a}\t{b}"
    return hashlib.blake2b(text.encode(), digest_size=8, key=str(seed).encode()).digest()


def split_triples(
    triples: Sequence[Triple],
    *,
    seed: int = 0,
    valid_size: int,
    test_size: int,
    grouping: str = "pair",
) -> Split:
    """Split ``triples`` as step 4 of the module's description says.

    Args:
        triples: distinct ``(head, relation, tail)`` triples.
        seed: the hash key; the same seed and triples give the same split.
        valid_size, test_size: at most this many triples each (fewer only when the
            constraints leave too few groups).
        grouping: ``"pair"`` (all triples between two entities go to one split) or
            ``"triple"`` (each triple alone, as WN18RR was split).

    Returns:
        The :class:`Split`.
    """
    if valid_size < 0 or test_size < 0:
        raise ValueError(f"split sizes must be >= 0, got valid {valid_size}, test {test_size}")
    if grouping not in GROUPINGS:
        raise ValueError(f"grouping is {grouping!r}; use one of {', '.join(GROUPINGS)}")
    # Key (a, b, relation-or-""): the relation only separates a pair's triples under "triple".
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    degree: Counter[str] = Counter()
    for number, (head, relation, tail) in enumerate(triples):
        if grouping == "pair":
            key = (min(head, tail), max(head, tail), "")
        else:
            key = (head, tail, relation)
        groups[key].append(number)
        degree[head] += 1
        degree[tail] += 1
    target = {"test": test_size, "valid": valid_size}
    chosen: dict[str, list[int]] = {"test": [], "valid": []}
    order = sorted(groups, key=lambda k: (_group_key(seed, *k), k))
    for key in order:
        if all(len(chosen[s]) >= target[s] for s in target):
            break
        a, b = key[0], key[1]
        members = groups[key]
        size = len(members)
        # Both ends must keep a train triple; a self-loop group takes 2 per triple from a.
        if a == b or degree[a] <= size or degree[b] <= size:
            continue
        for split in ("test", "valid"):
            if len(chosen[split]) + size <= target[split]:
                chosen[split].extend(members)
                degree[a] -= size
                degree[b] -= size
                break
    held = {n: s for s, numbers in chosen.items() for n in numbers}
    result = Split()
    for number, triple in enumerate(triples):
        getattr(result, held.get(number, "train")).append(triple)
    return result


def build_wn18rr_style(
    wordnet: WordNet,
    *,
    seed: int = 0,
    min_triples: int = 5,
    valid_size: int | None = None,
    test_size: int | None = None,
    grouping: str = "pair",
) -> WN18RRStyle:
    """Entities, triples and split of the WN18RR-style benchmark (see the module).

    Args:
        wordnet: all four parts of speech (``read_wordnet(pos="nvar")``).
        seed: the split's hash key.
        min_triples: WN18's selection threshold (step 2).
        valid_size, test_size: triples held out (default: WN18RR's shares, 3,034 and
            3,134 of 93,003, of the triples built).
        grouping: ``"pair"`` (no reverse leakage; default) or ``"triple"`` (WN18RR's way).

    Raises:
        ValueError: ``wordnet`` lacks a part of speech (WN18RR's relations span all four).
    """
    missing = [p for p in ("n", "v", "a", "r") if p not in wordnet.pos]
    if missing:
        raise ValueError(
            f"the WN18RR-style KG needs every part of speech (verb groups, similar-to, ...); "
            f"{','.join(missing)} were not read: read_wordnet(pos='nvar') (ptm wordnet-kg "
            "--pos all)"
        )
    entities = wn18_entities(wordnet, min_triples)
    triples = wordnet_triples(wordnet, entities, WN18RR_RELATIONS)
    if valid_size is None:
        valid_size = round(len(triples) * WN18RR_PUBLISHED["valid"] / _TOTAL)
    if test_size is None:
        test_size = round(len(triples) * WN18RR_PUBLISHED["test"] / _TOTAL)
    split = split_triples(
        triples, seed=seed, valid_size=valid_size, test_size=test_size, grouping=grouping
    )
    settings: dict[str, int | str] = {
        "grouping": grouping,
        "seed": seed,
        "min_triples": min_triples,
        "valid_size": valid_size,
        "test_size": test_size,
    }
    return WN18RRStyle(entities, split, settings)


def write_wn18rr_style(
    wordnet: WordNet,
    output_dir: str | Path,
    seed: int = 0,
    *,
    min_triples: int = 5,
    valid_size: int | None = None,
    test_size: int | None = None,
    grouping: str = "pair",
) -> WN18RRStyle:
    """Build (:func:`build_wn18rr_style`) and write the WN18RR-style benchmark.

    Files: ``entities.tsv`` (every kept synset, as :func:`write_wordnet_kg` writes them);
    ``train.tsv``, ``valid.tsv``, ``test.tsv`` (``head<TAB>relation<TAB>tail``, no comment
    line: WN18RR's own layout, which PyKEEN and most KGE code read);
    ``triples.tsv`` = the training triples, so that loading the folder as a KG
    (``load_knowledge_graph``, ``ptm embed-kg``) never shows a model a held-out triple;
    ``wn18rr.json``: the counts and the settings that reproduce them.

    Returns:
        The :class:`WN18RRStyle` written.
    """
    built = build_wn18rr_style(
        wordnet,
        seed=seed,
        min_triples=min_triples,
        valid_size=valid_size,
        test_size=test_size,
        grouping=grouping,
    )
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    write_entities_file(folder / "entities.tsv", (wordnet[s] for s in built.entities))
    for name in ("train", "valid", "test"):
        write_triples_file(folder / f"{name}.tsv", getattr(built.split, name), header=False)
    write_triples_file(folder / "triples.tsv", built.split.train)
    atomic_write_text(folder / "wn18rr.json", json.dumps(built.summary(), indent=2) + "\n")
    return built
