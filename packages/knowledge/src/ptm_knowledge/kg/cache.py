"""A loaded KG on disk: numpy arrays keyed by the input files' fingerprint, memory-mapped.

Parsing and validating 10M triple lines takes about a minute of Python; every ``ptm link``
and every Dask worker would pay it again. The first load writes the entity columns, the
triple arrays and the CSR adjacency as ``.npy`` files into
``<cache_dir>/kg-<sha256 of the inputs>/`` (atomically: a killed run leaves nothing a later
run reads); later loads of the same bytes memory-map them in about a second. Only arrays
and a JSON manifest are read back (no pickle), and an edited file changes the key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ptm_core.atomic import atomic_directory
from ptm_knowledge.kg.adjacency import Adjacency
from ptm_knowledge.kg.columns import StringColumn

if TYPE_CHECKING:
    from ptm_knowledge.kg.graph import KnowledgeGraph

# Bump when the stored layout changes: old entries are then never read.
CACHE_FORMAT = "ptm-kg/1"
_HASH_BLOCK = 8 * 2**20


def fingerprint_kg_files(*paths: Path | None) -> str:
    """SHA-256 over the cache format and each file's name and bytes (read in blocks)."""
    digest = hashlib.sha256(CACHE_FORMAT.encode())
    for path in paths:
        if path is None:
            digest.update(b"\x00none")
            continue
        digest.update(b"\x00" + path.name.encode() + b"\x00")
        with path.open("rb") as handle:
            while block := handle.read(_HASH_BLOCK):
                digest.update(block)
    return digest.hexdigest()


def cached_knowledge_graph(
    entities: Path, triples: Path | None, cache_dir: Path, parse: Callable[[], KnowledgeGraph]
) -> KnowledgeGraph:
    """The graph of ``entities`` + ``triples``: memory-mapped from ``cache_dir`` if stored
    there, else ``parse()`` (which validates, naming file:line on bad input), then stored.

    Returns:
        A :class:`~ptm_knowledge.kg.graph.KnowledgeGraph`.
    """
    # Parse errors (and a missing file) must name the file, so a missing input is left
    # to the parser rather than failing here in the hash.
    if not entities.is_file() or (triples is not None and not triples.is_file()):
        return parse()
    key = fingerprint_kg_files(entities, triples)
    entry = cache_dir / f"kg-{key[:32]}"
    if (entry / "manifest.json").is_file():
        try:
            return _read(entry, key, triples)
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry: parse again and replace it
    kg = parse()
    _write(kg, entry, key, entities, triples)
    return kg


def _column_arrays(name: str, column: StringColumn) -> dict[str, np.ndarray]:
    return {f"{name}.data": column.data, f"{name}.offsets": column.offsets}


def _write(kg: KnowledgeGraph, entry: Path, key: str, entities: Path, triples: Path | None) -> None:
    table, facts = kg.entities, kg.triples
    arrays: dict[str, np.ndarray] = {
        **_column_arrays("ids", table.ids),
        **_column_arrays("names", table.names),
        **_column_arrays("types", table.types),
        **_column_arrays("descriptions", table.descriptions),
        **_column_arrays("aliases", table.aliases),
        **_column_arrays("relation_names", StringColumn.from_strings(facts.relation_names)),
        "alias_offsets": table.alias_offsets,
        "heads": facts.heads,
        "relations": facts.relations,
        "tails": facts.tails,
        "source_lines": (
            facts.source_lines
            if facts.source_lines is not None
            else np.zeros(len(facts), dtype=np.int64)
        ),
        "adjacency.indptr": kg.adjacency.indptr,
        "adjacency.indices": kg.adjacency.indices,
        "adjacency.triple_ids": kg.adjacency.triple_ids,
    }
    manifest = {
        "format": CACHE_FORMAT,
        "fingerprint": key,
        "entities_file": str(entities),
        "triples_file": facts.source_file if triples is not None else "",
        "entities": len(table),
        "triples": len(facts),
        "arrays": sorted(arrays),
    }
    with atomic_directory(entry) as tmp:
        for name, values in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(values), allow_pickle=False)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _read(entry: Path, key: str, triples: Path | None) -> KnowledgeGraph:
    from ptm_knowledge.kg.graph import EntityTable, KnowledgeGraph, TripleTable

    manifest = json.loads((entry / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("format") != CACHE_FORMAT or manifest.get("fingerprint") != key:
        raise ValueError(f"{entry} is not a {CACHE_FORMAT} entry for {key}")

    def load(name: str) -> np.ndarray:
        return np.load(entry / f"{name}.npy", mmap_mode="r", allow_pickle=False)

    def column(name: str) -> StringColumn:
        return StringColumn(load(f"{name}.data"), load(f"{name}.offsets"))

    table = EntityTable(
        column("ids"),
        column("names"),
        column("types"),
        column("descriptions"),
        load("alias_offsets"),
        column("aliases"),
    )
    if len(table) != manifest["entities"]:
        raise ValueError(f"{entry}: {len(table)} entities, manifest says {manifest['entities']}")
    facts = TripleTable(
        load("heads"),
        load("relations"),
        load("tails"),
        column("relation_names").tolist(),
        table.ids,
        source_file=str(triples) if triples is not None else "",
        source_lines=load("source_lines") if triples is not None else None,
    )
    if len(facts) != manifest["triples"]:
        raise ValueError(f"{entry}: {len(facts)} triples, manifest says {manifest['triples']}")
    kg = KnowledgeGraph(table, facts)
    kg._adjacency = Adjacency(
        load("adjacency.indptr"), load("adjacency.indices"), load("adjacency.triple_ids")
    )
    return kg
