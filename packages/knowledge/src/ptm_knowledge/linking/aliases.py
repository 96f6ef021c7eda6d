"""Alias table: surface form -> candidate entities with priors, and entity context bags.

Stored compactly so that it scales to a 1M-entity KG: alias keys in one dict, candidates
as CSR arrays (``offsets``, int32 ``entity`` indices, float64 ``prior``), and context bags
computed on demand from the KG's adjacency (CSR) through a bounded cache instead of one
frozenset per entity up front.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ptm_knowledge.kg.graph import KnowledgeGraph

CaseMode = Literal["smart", "sensitive", "insensitive"]
CASE_MODES = ("smart", "sensitive", "insensitive")
# A canonical name is a stronger cue than a secondary alias ("Paris" the city is named
# "Paris"; the Trojan prince is named "Paris of Troy" and only aliased "Paris").
CANONICAL_WEIGHT = 2.0
ALIAS_WEIGHT = 1.0
# Context bags kept in memory at once (each a few kB); older ones are computed again.
CONTEXT_CACHE_SIZE = 32_768
# Longest text handed to the tokenizer at once (spaCy's default nlp.max_length is 10**6).
_CONTEXT_CHUNK_CHARS = 200_000


@dataclass(frozen=True)
class Candidate:
    """One entity an alias may refer to; ``prior`` = P(entity | alias) from the table."""

    entity_id: str
    prior: float


def alias_key(alias: str, case: CaseMode) -> str:
    """The lookup key of a surface form: itself, or lower-cased in ``insensitive`` mode."""
    return alias.lower() if case == "insensitive" else alias


def surface_variants(alias: str, case: CaseMode) -> list[str]:
    """Strings the mention detector matches for ``alias``.

    ``smart``: as written, plus a capitalised form of an all-lower-case alias
    ("polonium" also matches a sentence-initial "Polonium"), so capitalised names do not
    match common words ("Marathon" the town vs "marathon" the race). ``sensitive``: as
    written. ``insensitive``: matched on lower-cased text (the key is lower-case).
    """
    if case == "smart" and alias == alias.lower() and alias[:1].isalpha():
        return [alias, alias[:1].upper() + alias[1:]]
    return [alias]


class ContextBags(Mapping[str, frozenset[str]]):
    """Entity id -> its context bag, computed when asked and kept in a bounded cache.

    An entity's bag is the content words of ``"<type> <description> <neighbour names>"``,
    with the neighbours read from the KG's CSR adjacency in triple order.
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        tokenize: Callable[[str], Iterable[str]],
        cache_size: int = CONTEXT_CACHE_SIZE,
    ) -> None:
        self.kg = kg
        self.tokenize = tokenize
        self.bag = functools.lru_cache(maxsize=cache_size)(self._compute)

    def _compute(self, index: int) -> frozenset[str]:
        kg = self.kg
        names = kg.entities.names
        neighbour_names = " ".join(names[j] for j in kg.neighbour_indices(index).tolist())
        table = kg.entities
        text = f"{table.types[index]} {table.descriptions[index]} {neighbour_names}"
        words: set[str] = set()
        for chunk in _whitespace_chunks(text, _CONTEXT_CHUNK_CHARS):
            words.update(self.tokenize(chunk))
        return frozenset(words)

    def __getitem__(self, entity_id: str) -> frozenset[str]:
        return self.bag(self.kg.index[entity_id])

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self.kg.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.kg.entities.ids)

    def __len__(self) -> int:
        return len(self.kg)


def _whitespace_chunks(text: str, size: int) -> Iterator[str]:
    """``text`` cut at spaces into pieces of at most about ``size`` characters (one piece
    when it is shorter): the tokenizer splits on whitespace first, so the union of the
    pieces' words is the text's."""
    while len(text) > size:
        cut = text.rfind(" ", 0, size)
        if cut <= 0:
            cut = size
        yield text[:cut]
        text = text[cut:]
    yield text


class AliasTable:
    """Candidates per alias, built from an entity table ("bring your own alias table").

    Every canonical name and alias of every entity is a surface form. The prior of an
    entity for an alias is its weight (``CANONICAL_WEIGHT`` if the alias is the
    entity's canonical name, else ``ALIAS_WEIGHT``) divided by the alias's total weight.

    Candidates of alias key ``k`` are ``entity[offsets[k]:offsets[k + 1]]`` (entity
    indices, in table order) with ``prior[...]``.

    Args:
        kg: the entities (triples are used for context bags only).
        case: ``"smart"`` (default), ``"sensitive"`` or ``"insensitive"``.
        tokenize: splits a text into lower-case content words, for the context bags.
        context_cache_size: context bags kept in memory at once.
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        case: CaseMode = "smart",
        tokenize: Callable[[str], Iterable[str]] | None = None,
        *,
        context_cache_size: int = CONTEXT_CACHE_SIZE,
    ) -> None:
        if case not in CASE_MODES:
            raise ValueError(f"case must be one of {CASE_MODES}, got {case!r}")
        self.kg = kg
        self.case = case
        self.key_index: dict[str, int] = {}
        key_ids: list[int] = []
        entity_ids: list[int] = []
        weights: list[float] = []
        for index, entity in enumerate(kg.entities):
            for form in entity.surface_forms:
                key = alias_key(form, case)
                key_id = self.key_index.setdefault(key, len(self.key_index))
                key_ids.append(key_id)
                entity_ids.append(index)
                weights.append(CANONICAL_WEIGHT if form == entity.name else ALIAS_WEIGHT)
        keys = np.asarray(key_ids, dtype=np.int64)
        entities = np.asarray(entity_ids, dtype=np.int64)
        weight = np.asarray(weights, dtype=np.float64)
        del key_ids, entity_ids, weights
        # One row per (key, entity), its weight the largest over the entity's forms; rows of
        # a key in table order (the order in which the entities first gave the key).
        order = np.lexsort((entities, keys))
        keys, entities, weight = keys[order], entities[order], weight[order]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = (keys[1:] != keys[:-1]) | (entities[1:] != entities[:-1])
        starts = np.flatnonzero(first)
        weight = np.maximum.reduceat(weight, starts) if len(starts) else weight
        keys, entities = keys[starts], entities[starts]
        counts = np.bincount(keys, minlength=len(self.key_index))
        self.offsets = np.zeros(len(self.key_index) + 1, dtype=np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        totals = np.add.reduceat(weight, self.offsets[:-1]) if len(weight) else weight
        self.entity = entities.astype(np.int32)
        self.prior = weight / np.repeat(totals, counts)
        self.context_bags: Mapping[str, frozenset[str]] = (
            ContextBags(kg, tokenize, context_cache_size) if tokenize is not None else {}
        )

    def surface_variants(self, exact_wins: bool = False) -> Iterator[tuple[str, int]]:
        """``(string to match, alias key id)`` of every surface form's variants, each
        string once (its first entity's key wins), in table order.

        ``exact_wins``: a string first met as the capitalised variant of a lower-case
        alias ("Arctic" of "arctic", the overshoe) is given again, later, when an alias
        spelt that way exists ("Arctic", the region): the later pair is the one to keep.
        """
        seen: dict[str, bool] = {}  # string -> met as written (not as a variant)
        for entity in self.kg.entities:
            for form in entity.surface_forms:
                for variant in surface_variants(form, self.case):
                    exact = variant == form
                    before = seen.get(variant)
                    if before is None or (exact_wins and exact and not before):
                        seen[variant] = exact
                        yield variant, self.key_index[alias_key(form, self.case)]

    @property
    def surface_forms(self) -> dict[str, str]:
        """Matched string -> alias key (built on request; large for a large KG)."""
        keys = list(self.key_index)
        return {variant: keys[key_id] for variant, key_id in self.surface_variants()}

    def candidate_rows(self, key_id: int) -> tuple[np.ndarray, np.ndarray]:
        """``(entity indices, priors)`` of alias key ``key_id``."""
        lo, hi = self.offsets[key_id], self.offsets[key_id + 1]
        return self.entity[lo:hi], self.prior[lo:hi]

    def lookup(self, key: str) -> list[Candidate]:
        """Candidates of an alias key (empty list if the alias is unknown)."""
        key_id = self.key_index.get(key)
        if key_id is None:
            return []
        ids = self.kg.entities.ids
        entities, priors = self.candidate_rows(key_id)
        return [
            Candidate(ids[e], p) for e, p in zip(entities.tolist(), priors.tolist(), strict=True)
        ]

    @property
    def candidates(self) -> dict[str, list[Candidate]]:
        """Alias key -> candidates (built on request; large for a large KG)."""
        return {key: self.lookup(key) for key in self.key_index}

    def ambiguous(self) -> dict[str, list[Candidate]]:
        """Aliases with more than one candidate."""
        counts = np.diff(self.offsets)
        keys = list(self.key_index)
        return {keys[k]: self.lookup(keys[k]) for k in np.flatnonzero(counts > 1).tolist()}
