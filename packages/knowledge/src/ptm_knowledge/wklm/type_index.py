"""Entities grouped by KG type, once, as arrays: WKLM draws same-type replacements from it.

A KG has millions of entities: the index is three integer arrays (built in one pass over
the ``type`` column), and drawing another entity of the same type is O(1) with no scan.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptm_knowledge.kg.graph import KGError, KnowledgeGraph

NO_TYPE = -1


@dataclass(frozen=True)
class EntityTypeIndex:
    """Entity indices sorted by type, with each entity's type and rank inside its type.

    Entity ``i`` of type ``t = type_codes[i]`` (``-1``: empty ``type`` cell) sits at
    ``members[starts[t] + ranks[i]]``; its type has ``sizes[t]`` entities.

    Attributes:
        type_names: ``(T,)`` the distinct non-empty types, in order of first appearance.
        type_codes: ``(N,)`` int32 type of each entity (``-1``: none).
        members: ``(N_typed,)`` int64 entity indices grouped by type (stable order).
        starts: ``(T,)`` int64 first slot of each type in ``members``.
        sizes: ``(T,)`` int64 entities per type.
        ranks: ``(N,)`` int64 slot of each entity inside its type's group (``-1``: none).
        source: the entity table the KG was read from (named in errors), if known.
    """

    type_names: tuple[str, ...]
    type_codes: np.ndarray
    members: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    ranks: np.ndarray
    source: Path | None = None

    @classmethod
    def from_types(
        cls, types: list[str] | tuple[str, ...], source: Path | None = None
    ) -> EntityTypeIndex:
        """Build the index from one type label per entity (``""``: no type).

        Args:
            types: ``(N,)`` type labels in entity-index order.
            source: the entity table, for error messages.
        """
        codes_of: dict[str, int] = {}
        codes = np.full(len(types), NO_TYPE, dtype=np.int32)
        for i, label in enumerate(types):
            if label:
                codes[i] = codes_of.setdefault(label, len(codes_of))
        typed = np.flatnonzero(codes != NO_TYPE)
        order = typed[np.argsort(codes[typed], kind="stable")]
        sizes = np.bincount(codes[typed], minlength=len(codes_of)).astype(np.int64)
        starts = np.zeros(len(codes_of), dtype=np.int64)
        starts[1:] = np.cumsum(sizes)[:-1]
        ranks = np.full(len(types), -1, dtype=np.int64)
        if len(order):
            ranks[order] = np.arange(len(order)) - starts[codes[order]]
        return cls(tuple(codes_of), codes, order.astype(np.int64), starts, sizes, ranks, source)

    @classmethod
    def from_graph(cls, kg: KnowledgeGraph, source: str | Path | None = None) -> EntityTypeIndex:
        """The index of a loaded KG (its ``type`` column, in entity-index order).

        Args:
            kg: the knowledge graph.
            source: ``entities.tsv`` (or its folder), named in errors.
        """
        path = Path(source) if source is not None else None
        if path is not None and path.is_dir():
            path = path / "entities.tsv"
        return cls.from_types(list(kg.entities.types), path)

    def __len__(self) -> int:
        return len(self.type_codes)

    def type_name(self, entity: int) -> str:
        """The type label of entity ``entity`` (``""``: none)."""
        code = int(self.type_codes[entity])
        return self.type_names[code] if code != NO_TYPE else ""

    def replaceable(self, entities: np.ndarray) -> np.ndarray:
        """``(K,)`` bool: entity has a type shared with at least one other entity."""
        codes = self.type_codes[entities]
        ok = codes != NO_TYPE
        ok[ok] = self.sizes[codes[ok]] > 1
        return ok

    def sample_other(self, entities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Another entity of the same type, uniformly, for each of ``entities``.

        Draws a slot among the ``size - 1`` others of the type and skips the entity's own
        slot, so the result is never the entity itself.

        Args:
            entities: ``(K,)`` entity indices, all :meth:`replaceable`.
            rng: the seeded source of randomness.

        Returns:
            ``(K,)`` int64 entity indices.
        """
        codes = self.type_codes[entities].astype(np.int64)
        others = self.sizes[codes] - 1
        slot = np.floor(rng.random(len(entities)) * others).astype(np.int64)
        slot = np.minimum(slot, others - 1)
        slot += slot >= self.ranks[entities]
        return self.members[self.starts[codes] + slot]

    def require_types(self, entity_ids: list[str] | None = None) -> None:
        """Raise :class:`KGError` naming ``entities.tsv:line`` of the first untyped entity.

        Args:
            entity_ids: the KG's ids in index order (to name the entity and find its line).
        """
        untyped = np.flatnonzero(self.type_codes == NO_TYPE)
        if not len(untyped):
            return
        first = int(untyped[0])
        name = entity_ids[first] if entity_ids is not None else f"#{first}"
        raise KGError(
            self.source or "entities.tsv",
            _line_of(self.source, name),
            "type",
            f"entity {name!r} has no type ({len(untyped):,} entities have none); WKLM "
            "replaces a mention by another entity of the same type",
            "fill the type column, or set wklm.untyped=keep to leave their mentions unreplaced",
        )


def _line_of(path: Path | None, entity_id: str) -> int | None:
    """1-based line of ``entity_id``'s row in an entity table (read only on an error)."""
    if path is None or not path.is_file():
        return None
    prefix = entity_id + "\t"
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.startswith(prefix):
                return number
    return None


__all__ = ["NO_TYPE", "EntityTypeIndex"]
