"""K-BERT's lookup table from a knowledge graph: surface string -> objects in priority order.

The reference K-BERT reads ``subject \\t predicate \\t object`` lines into a dict of sets.
For a Wikidata-sized KG (1M entities, 10M triples) such a dict of Python strings takes
several GB; :class:`KBertKnowledge` keeps the same table as a handful of NumPy arrays:

- the subject surfaces as one UTF-8 buffer + offsets, found through a sorted array of their
  64-bit hashes (``np.searchsorted``, then a byte comparison: no false hits);
- each entity's facts as a CSR over triple order: ``(relation, tail)`` int32 pairs;
- the entity names once, as a UTF-8 buffer + offsets, to spell tails.

Object strings (``"capital of Poland"``) are made when a subject is looked up, for the few
subjects a sentence names. About 25 bytes per triple plus the names' bytes.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache

import numpy as np

from ptm_knowledge.kg import KnowledgeGraph


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class _Strings:
    """Strings as one UTF-8 buffer and ``(N + 1,)`` int64 offsets."""

    def __init__(self, strings: Iterable[str]) -> None:
        data, offsets = bytearray(), array("q", [0])
        for text in strings:
            data += text.encode("utf-8")
            offsets.append(len(data))
        self.data = np.frombuffer(bytes(data), dtype=np.uint8)
        self.offsets = np.frombuffer(offsets, dtype=np.int64).copy()

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def raw(self, index: int) -> bytes:
        return self.data[self.offsets[index] : self.offsets[index + 1]].tobytes()

    def __getitem__(self, index: int) -> str:
        return self.raw(index).decode("utf-8")

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + self.offsets.nbytes)


class KBertKnowledge(Mapping[str, list[str]]):
    """A read-only ``{surface string: [object, ...]}`` over compact arrays.

    Build it with :meth:`from_graph` (or :func:`knowledge_from_graph`). Objects of a
    surface come in triple-file order, entity by entity in table order when several
    entities share the surface, duplicates removed (first kept): the order ``max_entities``
    cuts in, the same every run.

    Attributes:
        max_subject_words: words (split on one space) of the longest surface, so
            :func:`~ptm_knowledge.kbert.build_sentence_tree` never scans the table.
    """

    def __init__(
        self,
        surfaces: _Strings,
        surface_entities: np.ndarray,
        names: _Strings,
        fact_offsets: np.ndarray,
        fact_relations: np.ndarray,
        fact_tails: np.ndarray,
        relation_texts: list[str],
        max_subject_words: int,
    ) -> None:
        self._surfaces, self._surface_entities = surfaces, surface_entities
        self._hashes = np.fromiter(
            (_hash(surfaces[i]) for i in range(len(surfaces))), np.uint64, len(surfaces)
        )
        # Sorted by hash, then by entity: a lookup reads a contiguous, entity-ordered range.
        self._order = np.lexsort((surface_entities, self._hashes))
        self._sorted_hashes = self._hashes[self._order]
        self._names = names
        self._fact_offsets, self._fact_relations = fact_offsets, fact_relations
        self._fact_tails = fact_tails
        self._relation_texts = relation_texts
        self.max_subject_words = max_subject_words
        self._lookup = lru_cache(maxsize=65536)(self._objects)

    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k != "_lookup"}  # a cache: not pickled

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lookup = lru_cache(maxsize=65536)(self._objects)

    @classmethod
    def from_graph(
        cls, kg: KnowledgeGraph, *, predicate: bool = True, aliases: bool = False
    ) -> KBertKnowledge:
        """Index ``kg``'s facts by entity name (and optionally aliases).

        Args:
            kg: a loaded graph (:func:`ptm_knowledge.kg.load_knowledge_graph`).
            predicate: prefix each object with its relation, underscores as spaces
                (``"capital of Poland"``), as the paper's ``"CEO Apple"``.
            aliases: also key the objects by every alias (ambiguous aliases such as
                ``Paris`` for Paris of Troy then merge the objects of several entities: off
                by default).
        """
        head_array, rel_array, tail_array, relation_names = _fact_arrays(kg)
        order = np.argsort(head_array, kind="stable")  # triple order within an entity
        counts = np.bincount(head_array, minlength=len(kg.entities))
        fact_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        owners = array("i")
        longest = [0]

        def subject_surfaces() -> Iterator[str]:  # streamed into one buffer, no list
            for row, entity in enumerate(kg.entities):
                if counts[row] == 0:
                    continue
                for surface in entity.surface_forms if aliases else (entity.name,):
                    owners.append(row)
                    longest[0] = max(longest[0], len(surface.split(" ")))
                    yield surface

        surfaces = _Strings(subject_surfaces())
        texts = [f"{name.replace('_', ' ')} " if predicate else "" for name in relation_names]
        return cls(
            surfaces,
            np.frombuffer(owners, dtype=np.int32).copy() if owners else np.zeros(0, np.int32),
            _Strings(entity.name for entity in kg.entities),
            fact_offsets,
            rel_array[order].copy(),
            tail_array[order].copy(),
            texts,
            longest[0],
        )

    def _rows(self, surface: str) -> list[int]:
        key = np.uint64(_hash(surface))
        lo = int(np.searchsorted(self._sorted_hashes, key, side="left"))
        hi = int(np.searchsorted(self._sorted_hashes, key, side="right"))
        raw = surface.encode("utf-8")
        rows: list[int] = []
        for k in self._order[lo:hi].tolist():
            if self._surfaces.raw(k) == raw:
                rows.append(int(self._surface_entities[k]))
        return rows

    def _objects(self, surface: str) -> tuple[str, ...] | None:
        rows = self._rows(surface)
        if not rows:
            return None
        objects: dict[str, None] = {}
        for row in dict.fromkeys(rows):
            first, last = int(self._fact_offsets[row]), int(self._fact_offsets[row + 1])
            for rel, tail in zip(
                self._fact_relations[first:last].tolist(),
                self._fact_tails[first:last].tolist(),
                strict=True,
            ):
                objects.setdefault(self._relation_texts[rel] + self._names[tail], None)
        return tuple(objects)

    def __getitem__(self, surface: str) -> list[str]:
        found = self._lookup(surface) if isinstance(surface, str) else None
        if found is None:
            raise KeyError(surface)
        return list(found)

    def __contains__(self, surface: object) -> bool:
        return isinstance(surface, str) and self._lookup(surface) is not None

    def __iter__(self) -> Iterator[str]:
        seen: set[str] = set()
        for k in range(len(self._surfaces)):
            surface = self._surfaces[k]
            if surface not in seen:
                seen.add(surface)
                yield surface

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays."""
        arrays = (
            self._surface_entities,
            self._hashes,
            self._order,
            self._sorted_hashes,
            self._fact_offsets,
            self._fact_relations,
            self._fact_tails,
        )
        return self._surfaces.nbytes + self._names.nbytes + sum(int(a.nbytes) for a in arrays)


def _fact_arrays(kg: KnowledgeGraph) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """``(heads, relations, tails)`` int32 entity/relation indices and relation names.

    A graph whose triple table already holds int32 columns (``heads``, ``relations``,
    ``tails``, ``relation_names``: the CSR-backed KG loader) is read without a copy per
    triple; otherwise the triples are walked once.
    """
    table = kg.triples
    if all(hasattr(table, a) for a in ("heads", "relations", "tails", "relation_names")):
        return (
            np.asarray(table.heads, dtype=np.int32),
            np.asarray(table.relations, dtype=np.int32),
            np.asarray(table.tails, dtype=np.int32),
            list(table.relation_names),
        )
    index = getattr(kg, "index", None)
    if not isinstance(index, Mapping):
        index = {entity.id: i for i, entity in enumerate(kg.entities)}
    heads, relations, tails = array("i"), array("i"), array("i")
    relation_ids: dict[str, int] = {}
    for triple in table:
        heads.append(index[triple.head])
        relations.append(relation_ids.setdefault(triple.relation, len(relation_ids)))
        tails.append(index[triple.tail])
    return (
        np.array(heads, dtype=np.int32),
        np.array(relations, dtype=np.int32),
        np.array(tails, dtype=np.int32),
        list(relation_ids),
    )


def knowledge_from_graph(
    kg: KnowledgeGraph, *, predicate: bool = True, aliases: bool = False
) -> KBertKnowledge:
    """K-BERT's lookup table of ``kg``: :meth:`KBertKnowledge.from_graph`.

    Args:
        kg: a loaded graph (:func:`ptm_knowledge.kg.load_knowledge_graph`).
        predicate: prefix each object with its relation (``"capital of Poland"``).
        aliases: also key the objects by every alias (off by default: ambiguous aliases
            merge several entities' objects).

    Returns:
        A read-only mapping ``{surface string: [object, ...]}``, duplicates removed, first
        occurrence kept, in triple-file order.
    """
    return KBertKnowledge.from_graph(kg, predicate=predicate, aliases=aliases)
