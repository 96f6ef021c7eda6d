"""Knowledge-graph data: an entity table (ids, names, aliases) and TSV triples.

File formats are specified in ``data_specs/knowledge_graph/README.md``. Loading validates
every line and raises :class:`KGError` naming the file, line and field at fault.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ptm_core.data.errors import DataError
from ptm_core.data.lines import iter_lines

ENTITY_COLUMNS = ("id", "name", "type", "aliases", "description")
ALIAS_SEPARATOR = "|"


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


@dataclass
class KnowledgeGraph:
    """Entities plus triples between them.

    Args:
        entities: the entity table, in file order (this order defines entity indices).
        triples: facts whose head and tail are ids of ``entities``.
    """

    entities: list[Entity]
    triples: list[Triple] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.index = {entity.id: i for i, entity in enumerate(self.entities)}
        if len(self.index) != len(self.entities):
            raise ValueError("duplicate entity ids in KnowledgeGraph.entities")

    @property
    def entity_ids(self) -> list[str]:
        """Ids in table order; position = the entity index used by models."""
        return [entity.id for entity in self.entities]

    def __getitem__(self, entity_id: str) -> Entity:
        return self.entities[self.index[entity_id]]

    def __len__(self) -> int:
        return len(self.entities)

    def neighbours(self, entity_id: str) -> list[str]:
        """Ids linked to ``entity_id`` by a triple in either direction."""
        out: list[str] = []
        for triple in self.triples:
            if triple.head == entity_id:
                out.append(triple.tail)
            elif triple.tail == entity_id:
                out.append(triple.head)
        return out

    def labeled_triples(self) -> list[tuple[str, str, str]]:
        """Triples as ``(head, relation, tail)`` string tuples (PyKEEN's labelled form)."""
        return [(t.head, t.relation, t.tail) for t in self.triples]


def _content_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of non-blank, non-comment lines; checks the encoding.

    Lines are split on ``\\n`` only (:func:`~ptm_core.data.lines.iter_lines`), so a U+2028
    inside a cell neither splits a row nor shifts the line numbers of later errors.
    """
    for number, line in iter_lines(path, KGError):
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


def read_entity_table(path: str | Path) -> list[Entity]:
    """Read an entity table (TSV with the header ``id name type aliases description``).

    Args:
        path: the ``entities.tsv`` file.

    Returns:
        The entities in file order.

    Raises:
        KGError: a missing file, invalid UTF-8, missing or wrong header, wrong column
            count, a NUL character in a cell, empty id or name, an id with whitespace, or a
            duplicate id (the message names both lines).
    """
    path = Path(path)
    entities: list[Entity] = []
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
        alias_list = tuple(a.strip() for a in aliases.split(ALIAS_SEPARATOR) if a.strip())
        first_seen[entity_id] = number
        entities.append(Entity(entity_id, name, alias_list, type_, description))
    if not header_seen:
        raise KGError(path, None, "header", "the file has no header and no entities", "add both")
    return entities


def read_triples(path: str | Path, entity_ids: Sequence[str] | set[str]) -> list[Triple]:
    """Read TSV triples ``head<TAB>relation<TAB>tail`` whose ends are known entity ids.

    Args:
        path: the ``triples.tsv`` file (``#`` comment lines and blank lines skipped).
        entity_ids: the ids of the entity table.

    Raises:
        KGError: a missing file, invalid UTF-8, a line without exactly three non-empty
            cells, a NUL character in a cell, or an unknown head/tail id.
    """
    path = Path(path)
    known = set(entity_ids)
    triples: list[Triple] = []
    for number, line in _content_lines(path):
        cells = [c.strip() for c in line.split("\t")]
        if len(cells) != 3 or not all(cells):
            raise KGError(
                path,
                number,
                "columns",
                f"expected head<TAB>relation<TAB>tail, got {line!r}",
                "write three non-empty tab-separated cells per line",
            )
        for column, cell in zip(("head", "relation", "tail"), cells, strict=True):
            _check_nul(path, number, column, cell)
        head, relation, tail = cells
        for name, value in (("head", head), ("tail", tail)):
            if value not in known:
                raise KGError(
                    path,
                    number,
                    name,
                    f"unknown entity id {value!r}",
                    "add the entity to the entity table or fix the id",
                )
        triples.append(Triple(head, relation, tail, f"{path}:{number}"))
    return triples


def load_knowledge_graph(entities: str | Path, triples: str | Path | None = None) -> KnowledgeGraph:
    """Load and validate an entity table and (optionally) its triples.

    Args:
        entities: ``entities.tsv`` path, or a directory holding ``entities.tsv`` and
            ``triples.tsv``.
        triples: ``triples.tsv`` path (default: beside the entity table, if present).

    Returns:
        A :class:`KnowledgeGraph`.
    """
    entities = Path(entities)
    if entities.is_dir():
        folder = entities
        entities = folder / "entities.tsv"
        if triples is None and (folder / "triples.tsv").exists():
            triples = folder / "triples.tsv"
    table = read_entity_table(entities)
    facts = read_triples(triples, {e.id for e in table}) if triples is not None else []
    return KnowledgeGraph(table, facts)
