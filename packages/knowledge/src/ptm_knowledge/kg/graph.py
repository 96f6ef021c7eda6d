"""Knowledge-graph data: an entity table (ids, names, aliases) and TSV triples.

File formats are specified in ``data_specs/knowledge_graph/README.md``. Loading validates
every line and raises :class:`KGError` naming the file, line and field at fault.

A loaded graph is columnar: entity strings live in :class:`StringColumn` buffers and
triples in int32 arrays (:class:`TripleTable`), with the adjacency built once as CSR
arrays (:class:`~ptm_knowledge.kg.adjacency.Adjacency`). :class:`Entity` and
:class:`Triple` objects are made when a row is read, so a 1M-entity / 10M-triple KG fits
in well under a gigabyte, and ``load_knowledge_graph(..., cache_dir=...)`` memory-maps
it from a cache keyed by the input files' fingerprint.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

import numpy as np

from ptm_core.data.errors import DataError
from ptm_core.data.lines import decode_line
from ptm_knowledge.kg.adjacency import Adjacency
from ptm_knowledge.kg.columns import StringColumn, StringColumnBuilder

ENTITY_COLUMNS = ("id", "name", "type", "aliases", "description")
ALIAS_SEPARATOR = "|"
# Lines decoded per block: one UTF-8 decode and one split per block instead of per line.
_BLOCK_BYTES = 16 * 2**20


class KGError(DataError):
    """A knowledge-graph file is malformed.

    The message reads ``"<file>:<line>: <problem> (field '<field>'); <fix>"``.

    Arguments and message format: :class:`ptm_core.data.errors.DataError`.
    """


@dataclass(frozen=True)
class Entity:
    """One row of the entity table.

    Args:
        id: unique entity id (no whitespace).
        name: canonical name (also an alias).
        aliases: further surface forms, in file order.
        type: optional type label (``person``, ``city``, ...).
        description: optional one-sentence description (used by context ranking).
    """

    id: str
    name: str
    aliases: tuple[str, ...] = ()
    type: str = ""
    description: str = ""

    @property
    def surface_forms(self) -> tuple[str, ...]:
        """The canonical name followed by the aliases, without duplicates."""
        seen: dict[str, None] = {self.name: None}
        for alias in self.aliases:
            seen.setdefault(alias, None)
        return tuple(seen)


@dataclass(frozen=True)
class Triple:
    """A ``(head, relation, tail)`` fact with entity ids; ``source`` is ``file:line``."""

    head: str
    relation: str
    tail: str
    source: str = ""


class EntityTable(Sequence[Entity]):
    """The entity table as string columns; reading row ``i`` gives an :class:`Entity`.

    Args:
        ids, names, types, descriptions: one row per entity.
        alias_offsets: ``(N + 1,)`` int64; entity ``i``'s aliases are
            ``aliases[alias_offsets[i]:alias_offsets[i + 1]]``.
        aliases: every alias of every entity, in table order.
    """

    def __init__(
        self,
        ids: StringColumn,
        names: StringColumn,
        types: StringColumn,
        descriptions: StringColumn,
        alias_offsets: np.ndarray,
        aliases: StringColumn,
    ) -> None:
        self.ids, self.names, self.types, self.descriptions = ids, names, types, descriptions
        self.alias_offsets, self.aliases = alias_offsets, aliases

    @classmethod
    def from_entities(cls, entities: Iterable[Entity]) -> EntityTable:
        builder = _EntityTableBuilder()
        for entity in entities:
            builder.append(entity.id, entity.name, entity.type, entity.description, entity.aliases)
        return builder.finish()

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Entity: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entity]: ...

    def __getitem__(self, index: int | slice) -> Entity | list[Entity]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        first, last = int(self.alias_offsets[index]), int(self.alias_offsets[index + 1])
        return Entity(
            self.ids[index],
            self.names[index],
            tuple(self.aliases[first:last]),
            self.types[index],
            self.descriptions[index],
        )

    def __iter__(self) -> Iterator[Entity]:
        aliases = iter(self.aliases)
        counts = np.diff(self.alias_offsets).tolist()
        for entity_id, name, type_, description, count in zip(
            self.ids, self.names, self.types, self.descriptions, counts, strict=True
        ):
            own = tuple(next(aliases) for _ in range(count))
            yield Entity(entity_id, name, own, type_, description)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EntityTable({len(self)} entities)"


class _EntityTableBuilder:
    def __init__(self) -> None:
        self.ids, self.names = StringColumnBuilder(), StringColumnBuilder()
        self.types, self.descriptions = StringColumnBuilder(), StringColumnBuilder()
        self.aliases = StringColumnBuilder()
        self.alias_offsets = array("q", [0])

    def append(
        self, entity_id: str, name: str, type_: str, description: str, aliases: Sequence[str]
    ) -> None:
        self.ids.append(entity_id)
        self.names.append(name)
        self.types.append(type_)
        self.descriptions.append(description)
        for alias in aliases:
            self.aliases.append(alias)
        self.alias_offsets.append(len(self.aliases))

    def finish(self) -> EntityTable:
        offsets = np.frombuffer(self.alias_offsets.tobytes(), dtype=np.int64).copy()
        return EntityTable(
            self.ids.finish(),
            self.names.finish(),
            self.types.finish(),
            self.descriptions.finish(),
            offsets,
            self.aliases.finish(),
        )


class TripleTable(Sequence[Triple]):
    """Triples as int32 arrays; reading row ``i`` gives a :class:`Triple` with string ids.

    Args:
        heads, relations, tails: ``(T,)`` int32 entity / relation indices.
        relation_names: relation index -> name.
        entity_ids: entity index -> id (the graph's ``entities.ids``).
        source_file: the file the triples were read from (``""`` if none).
        source_lines: ``(T,)`` int64 line of each triple in ``source_file``, or ``None``.
        sources: per-triple ``source`` strings, for triples built from objects.
    """

    def __init__(
        self,
        heads: np.ndarray,
        relations: np.ndarray,
        tails: np.ndarray,
        relation_names: Sequence[str],
        entity_ids: Sequence[str],
        *,
        source_file: str = "",
        source_lines: np.ndarray | None = None,
        sources: Sequence[str] | None = None,
    ) -> None:
        self.heads, self.relations, self.tails = heads, relations, tails
        self.relation_names = list(relation_names)
        self.entity_ids = entity_ids
        self.source_file, self.source_lines, self.sources = source_file, source_lines, sources

    @classmethod
    def from_triples(cls, triples: Iterable[Triple], index: dict[str, int]) -> TripleTable:
        """Index ``Triple`` objects against ``index`` (entity id -> position)."""
        heads, relations, tails = array("i"), array("i"), array("i")
        names: dict[str, int] = {}
        sources: list[str] = []
        for triple in triples:
            for end in (triple.head, triple.tail):
                if end not in index:
                    raise ValueError(f"triple {triple} names an entity not in the table: {end!r}")
            heads.append(index[triple.head])
            tails.append(index[triple.tail])
            relations.append(names.setdefault(triple.relation, len(names)))
            sources.append(triple.source)
        ordered = sorted(index.items(), key=lambda item: item[1])
        ids = [entity_id for entity_id, _ in ordered]
        return cls(
            _int32(heads), _int32(relations), _int32(tails), list(names), ids, sources=sources
        )

    def __len__(self) -> int:
        return len(self.heads)

    def source(self, index: int) -> str:
        """``file:line`` of triple ``index`` (``""`` when unknown)."""
        if self.source_lines is not None:
            return f"{self.source_file}:{int(self.source_lines[index])}"
        return self.sources[index] if self.sources is not None else ""

    @overload
    def __getitem__(self, index: int) -> Triple: ...

    @overload
    def __getitem__(self, index: slice) -> list[Triple]: ...

    def __getitem__(self, index: int | slice) -> Triple | list[Triple]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"triple {index} of {len(self)}")
        return Triple(
            self.entity_ids[int(self.heads[index])],
            self.relation_names[int(self.relations[index])],
            self.entity_ids[int(self.tails[index])],
            self.source(index),
        )

    def __iter__(self) -> Iterator[Triple]:
        for index in range(len(self)):
            yield self[index]

    def labeled(self) -> Iterator[tuple[str, str, str]]:
        """``(head, relation, tail)`` string tuples, in file order."""
        ids, names = list(self.entity_ids), self.relation_names
        heads, relations, tails = self.heads.tolist(), self.relations.tolist(), self.tails.tolist()
        for h, r, t in zip(heads, relations, tails, strict=True):
            yield ids[h], names[r], ids[t]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TripleTable({len(self)} triples)"


def _int32(values: array) -> np.ndarray:
    return np.frombuffer(values.tobytes(), dtype=np.int32).copy()


class KnowledgeGraph:
    """Entities plus triples between them.

    Args:
        entities: the entity table, in file order (this order defines entity indices): a
            list of :class:`Entity` or an :class:`EntityTable`.
        triples: facts whose head and tail are ids of ``entities``: a list of
            :class:`Triple` or a :class:`TripleTable` over the same entity order.

    Attributes:
        entities: an :class:`EntityTable` (a sequence of :class:`Entity`).
        triples: a :class:`TripleTable` (a sequence of :class:`Triple`).
        index: entity id -> entity index.
    """

    def __init__(
        self,
        entities: Sequence[Entity] | EntityTable,
        triples: Sequence[Triple] | TripleTable = (),
    ) -> None:
        table = (
            entities if isinstance(entities, EntityTable) else EntityTable.from_entities(entities)
        )
        self.entities = table
        self.index = dict(zip(table.ids, range(len(table)), strict=True))
        if len(self.index) != len(table):
            raise ValueError("duplicate entity ids in KnowledgeGraph.entities")
        if isinstance(triples, TripleTable):
            self.triples = triples
        else:
            self.triples = TripleTable.from_triples(triples, self.index)
        self.triples.entity_ids = table.ids
        self._adjacency: Adjacency | None = None

    @property
    def entity_ids(self) -> list[str]:
        """Ids in table order; position = the entity index used by models."""
        return self.entities.ids.tolist()

    def __getitem__(self, entity_id: str) -> Entity:
        return self.entities[self.index[entity_id]]

    def __len__(self) -> int:
        return len(self.entities)

    @property
    def adjacency(self) -> Adjacency:
        """The CSR adjacency over entity indices, built on first use (``O(T log T)``)."""
        if self._adjacency is None:
            self._adjacency = Adjacency.build(
                self.triples.heads, self.triples.tails, len(self.entities)
            )
        return self._adjacency

    def neighbour_indices(self, index: int) -> np.ndarray:
        """``(k,)`` int32 indices linked to entity ``index`` by a triple, in triple order."""
        return self.adjacency.neighbours(index)

    def neighbours(self, entity_id: str) -> list[str]:
        """Ids linked to ``entity_id`` by a triple in either direction, in triple order."""
        index = self.index.get(entity_id)
        if index is None:
            return []
        ids = self.entities.ids
        return [ids[i] for i in self.neighbour_indices(index).tolist()]

    def labeled_triples(self) -> list[tuple[str, str, str]]:
        """Triples as ``(head, relation, tail)`` string tuples (PyKEEN's labelled form)."""
        return list(self.triples.labeled())

    def __repr__(self) -> str:
        return f"KnowledgeGraph({len(self.entities)} entities, {len(self.triples)} triples)"


def _content_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of non-blank, non-comment lines; checks the encoding.

    Lines are split on ``\\n`` only (as :func:`~ptm_core.data.lines.iter_lines`), so a
    U+2028 inside a cell neither splits a row nor shifts the line numbers of later errors.
    Blocks of lines are decoded at once; a block that is not UTF-8 is decoded line by line
    to name the bad line.
    """
    if not path.is_file():
        raise KGError(path, None, "path", "file not found", "give the path of an existing file")
    number = 0
    with path.open("rb") as handle:
        while True:
            raw = handle.readlines(_BLOCK_BYTES)
            if not raw:
                return
            try:
                text = b"".join(raw).decode("utf-8")
            except UnicodeDecodeError:
                lines = [decode_line(r, path, number + k, KGError) for k, r in enumerate(raw, 1)]
            else:
                lines = text.split("\n")[: len(raw)]
                if number == 0 and lines[0].startswith("\ufeff"):
                    lines[0] = lines[0][1:]
                lines = [line[:-1] if line.endswith("\r") else line for line in lines]
            for line in lines:
                number += 1
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                yield number, line


def _check_nul(path: Path, number: int, field_name: str, text: str) -> None:
    """Reject NUL: it ends strings in C tools and spaCy patterns, so a name would differ."""
    if "\x00" in text:
        raise KGError(
            path,
            number,
            field_name,
            f"NUL character (\\x00) at character {text.index(chr(0)) + 1}",
            "remove it (the file may be UTF-16 or binary; re-encode it as UTF-8 text)",
        )


def _read_entity_table(path: Path) -> EntityTable:
    builder = _EntityTableBuilder()
    first_seen: dict[str, int] = {}
    header_seen = False
    for number, line in _content_lines(path):
        cells = line.split("\t")
        if not header_seen:
            if tuple(c.strip() for c in cells) != ENTITY_COLUMNS:
                raise KGError(
                    path,
                    number,
                    "header",
                    f"expected the header {'<TAB>'.join(ENTITY_COLUMNS)}, got {line!r}",
                    "make the first non-comment line the tab-separated column names",
                )
            header_seen = True
            continue
        if len(cells) != len(ENTITY_COLUMNS):
            raise KGError(
                path,
                number,
                "columns",
                f"expected {len(ENTITY_COLUMNS)} tab-separated columns, got {len(cells)}",
                "separate id, name, type, aliases and description by tabs (empty cells allowed"
                " for type, aliases and description)",
            )
        entity_id, name, type_, aliases, description = (c.strip() for c in cells)
        if "\x00" in line:
            for column, cell in zip(ENTITY_COLUMNS, cells, strict=True):
                _check_nul(path, number, column, cell)
        if not entity_id or any(ch.isspace() for ch in entity_id):
            raise KGError(
                path,
                number,
                "id",
                f"bad entity id {entity_id!r}",
                "use a non-empty id without spaces",
            )
        if entity_id in first_seen:
            raise KGError(
                path,
                number,
                "id",
                f"duplicate entity id {entity_id!r} (first on line {first_seen[entity_id]})",
                "give every entity a unique id",
            )
        if not name:
            raise KGError(path, number, "name", "empty canonical name", "give every entity a name")
        alias_list = [a.strip() for a in aliases.split(ALIAS_SEPARATOR)] if aliases else []
        first_seen[entity_id] = number
        builder.append(entity_id, name, type_, description, [a for a in alias_list if a])
    if not header_seen:
        raise KGError(path, None, "header", "the file has no header and no entities", "add both")
    if not first_seen:
        # An empty table links nothing: `ptm link` wrote a corpus without one mention.
        raise KGError(
            path,
            None,
            "id",
            "the table has its header but no entity (at least 1 row is needed)",
            "add one entity per line below the header: id<TAB>name<TAB>type<TAB>aliases"
            "<TAB>description",
        )
    return builder.finish()


def read_entity_table(path: str | Path) -> EntityTable:
    """Read an entity table (TSV with the header ``id name type aliases description``).

    Args:
        path: the ``entities.tsv`` file.

    Returns:
        The entities in file order, as an :class:`EntityTable` (a sequence of
        :class:`Entity`).

    Raises:
        KGError: a missing file, invalid UTF-8, missing or wrong header, wrong column
            count, a NUL character in a cell, empty id or name, an id with whitespace, or a
            duplicate id (the message names both lines).
    """
    return _read_entity_table(Path(path))


def _read_triple_table(path: Path, index: dict[str, int], ids: Sequence[str]) -> TripleTable:
    heads, relations, tails, lines = array("i"), array("i"), array("i"), array("q")
    names: dict[str, int] = {}
    lookup = index.get
    for number, line in _content_lines(path):
        cells = line.split("\t")
        if len(cells) == 3:
            head, relation, tail = cells[0].strip(), cells[1].strip(), cells[2].strip()
        if len(cells) != 3 or not (head and relation and tail):
            raise KGError(
                path,
                number,
                "columns",
                f"expected head<TAB>relation<TAB>tail, got {line!r}",
                "write three non-empty tab-separated cells per line",
            )
        if "\x00" in line:
            for column, cell in zip(("head", "relation", "tail"), cells, strict=True):
                _check_nul(path, number, column, cell)
        h, t = lookup(head), lookup(tail)
        if h is None or t is None:
            field_name, value = ("head", head) if h is None else ("tail", tail)
            raise KGError(
                path,
                number,
                field_name,
                f"unknown entity id {value!r}",
                "add the entity to the entity table or fix the id",
            )
        r = names.get(relation)
        if r is None:
            r = names[relation] = len(names)
        heads.append(h)
        relations.append(r)
        tails.append(t)
        lines.append(number)
    return TripleTable(
        _int32(heads),
        _int32(relations),
        _int32(tails),
        list(names),
        ids,
        source_file=str(path),
        source_lines=np.frombuffer(lines.tobytes(), dtype=np.int64).copy(),
    )


def read_triples(path: str | Path, entity_ids: Sequence[str] | set[str]) -> TripleTable:
    """Read TSV triples ``head<TAB>relation<TAB>tail`` whose ends are known entity ids.

    Args:
        path: the ``triples.tsv`` file (``#`` comment lines and blank lines skipped).
        entity_ids: the ids of the entity table.

    Returns:
        A :class:`TripleTable` (a sequence of :class:`Triple`, ``source`` = ``file:line``).

    Raises:
        KGError: a missing file, invalid UTF-8, a line without exactly three non-empty
            cells, a NUL character in a cell, or an unknown head/tail id.
    """
    ids = list(entity_ids)
    return _read_triple_table(Path(path), {e: i for i, e in enumerate(ids)}, ids)


def parse_knowledge_graph(entities: Path, triples: Path | None) -> KnowledgeGraph:
    """Read and validate ``entities`` and (if given) ``triples`` into a :class:`KnowledgeGraph`
    (no cache: :func:`~ptm_knowledge.kg.load.load_knowledge_graph` adds one)."""
    table = _read_entity_table(entities)
    kg = KnowledgeGraph(table)
    if triples is not None:
        kg.triples = _read_triple_table(triples, kg.index, table.ids)
    return kg
