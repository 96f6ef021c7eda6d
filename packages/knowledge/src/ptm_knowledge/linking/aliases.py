"""Alias table: surface form -> candidate entities with priors, and entity context bags."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ptm_knowledge.kg.graph import KnowledgeGraph

CaseMode = Literal["smart", "sensitive", "insensitive"]
CASE_MODES = ("smart", "sensitive", "insensitive")
# A canonical name is a stronger cue than a secondary alias ("Paris" the city is named
# "Paris"; the Trojan prince is named "Paris of Troy" and only aliased "Paris").
CANONICAL_WEIGHT = 2.0
ALIAS_WEIGHT = 1.0


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


class AliasTable:
    """Candidates per alias, built from an entity table ("bring your own alias table").

    Every canonical name and alias of every entity is a surface form. The prior of an
    entity for an alias is its weight (``CANONICAL_WEIGHT`` if the alias is the
    entity's canonical name, else ``ALIAS_WEIGHT``) divided by the alias's total weight.

    Args:
        kg: the entities (triples are used for context bags only).
        case: ``"smart"`` (default), ``"sensitive"`` or ``"insensitive"``.
        tokenize: splits a text into lower-case content words, for the context bags.
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        case: CaseMode = "smart",
        tokenize: Callable[[str], Iterable[str]] | None = None,
    ) -> None:
        if case not in CASE_MODES:
            raise ValueError(f"case must be one of {CASE_MODES}, got {case!r}")
        self.case = case
        weights: dict[str, dict[str, float]] = defaultdict(dict)
        for entity in kg.entities:
            for form in entity.surface_forms:
                key = alias_key(form, case)
                weight = CANONICAL_WEIGHT if form == entity.name else ALIAS_WEIGHT
                weights[key][entity.id] = max(weights[key].get(entity.id, 0.0), weight)
        self.candidates: dict[str, list[Candidate]] = {}
        for key, by_entity in weights.items():
            total = sum(by_entity.values())
            self.candidates[key] = [Candidate(e, w / total) for e, w in by_entity.items()]
        self.surface_forms: dict[str, str] = {}  # matched string -> key
        for entity in kg.entities:
            for form in entity.surface_forms:
                for variant in surface_variants(form, case):
                    self.surface_forms.setdefault(variant, alias_key(form, case))
        self.context_bags: dict[str, frozenset[str]] = {}
        if tokenize is not None:
            for entity in kg.entities:
                neighbour_names = " ".join(kg[n].name for n in kg.neighbours(entity.id))
                text = f"{entity.type} {entity.description} {neighbour_names}"
                self.context_bags[entity.id] = frozenset(tokenize(text))

    def lookup(self, key: str) -> list[Candidate]:
        """Candidates of an alias key (empty list if the alias is unknown)."""
        return self.candidates.get(key, [])

    def ambiguous(self) -> dict[str, list[Candidate]]:
        """Aliases with more than one candidate."""
        return {k: v for k, v in self.candidates.items() if len(v) > 1}
