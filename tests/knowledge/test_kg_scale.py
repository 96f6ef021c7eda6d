"""The columnar KG: CSR adjacency equals the former triple scan, the disk cache, file:line
errors from the block reader, and the old object API."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from knowledge_sample_paths import KG_DIR

import ptm_knowledge.kg.graph as graph
from ptm_knowledge.kg import Entity, KGError, KnowledgeGraph, Triple, load_knowledge_graph
from ptm_knowledge.kg.adjacency import Adjacency

HEADER = "id\tname\ttype\taliases\tdescription\n"


def scan_neighbours(triples: list[Triple], entity_id: str) -> list[str]:
    """The former ``KnowledgeGraph.neighbours``: a scan of every triple."""
    out: list[str] = []
    for triple in triples:
        if triple.head == entity_id:
            out.append(triple.tail)
        elif triple.tail == entity_id:
            out.append(triple.head)
    return out


def generated_kg(folder: Path, entities: int = 300, triples: int = 3000, seed: int = 0) -> Path:
    """A KG with hubs, isolated entities, self-loops, duplicate triples and comments."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [HEADER, "# a comment line\n"]
    for i in range(entities):
        alias = f"E{i % 17}|e {i}" if i % 3 == 0 else ""
        rows.append(f"e{i}\tEntity {i}\tthing\t{alias}\tnumber {i}\n")
    (folder / "entities.tsv").write_text("".join(rows), encoding="utf-8")
    heads = (rng.pareto(1.2, triples) * 10).astype(int) % (entities - 20)  # e280+ isolated
    tails = rng.integers(0, entities - 20, triples)
    tails[::50] = heads[::50]  # self-loops
    lines = [f"e{h}\tr{r}\te{t}\n" for h, r, t in zip(heads, heads % 7, tails, strict=True)]
    lines[10:10] = [lines[3], "\n", "# comment\n"]  # a duplicate triple, blank, comment
    (folder / "triples.tsv").write_text("".join(lines), encoding="utf-8")
    return folder


@pytest.mark.parametrize("which", ["sample", "generated"])
def test_adjacency_equals_the_triple_scan(tmp_path: Path, which: str) -> None:
    folder = KG_DIR if which == "sample" else generated_kg(tmp_path / "kg")
    kg = load_knowledge_graph(folder)
    assert len(kg.triples) > 200
    triples = list(kg.triples)
    for entity_id in kg.entity_ids:
        assert kg.neighbours(entity_id) == scan_neighbours(triples, entity_id), entity_id
    assert kg.neighbours("no_such_entity") == []
    # The CSR arrays themselves: compact dtypes, one entry per triple end (self-loops once).
    adjacency = kg.adjacency
    loops = int(np.sum(kg.triples.heads == kg.triples.tails))
    assert adjacency.indices.dtype == np.int32 and kg.triples.heads.dtype == np.int32
    assert len(adjacency.indices) == 2 * len(kg.triples) - loops
    assert adjacency.indptr[-1] == len(adjacency.indices)


def test_adjacency_of_a_graph_built_from_objects_and_of_no_triples() -> None:
    entities = [Entity("a", "A"), Entity("b", "B"), Entity("c", "C")]
    triples = [Triple("a", "r", "b"), Triple("c", "r", "c"), Triple("b", "s", "a")]
    kg = KnowledgeGraph(entities, triples)
    assert [kg.neighbours(e) for e in "abc"] == [["b", "b"], ["a", "a"], ["c"]]
    assert kg.labeled_triples() == [("a", "r", "b"), ("c", "r", "c"), ("b", "s", "a")]
    assert list(kg.triples) == triples and kg.triples[-1] == triples[-1]
    assert list(kg.entities) == entities and kg["b"] == entities[1]
    empty = Adjacency.build(np.zeros(0, np.int32), np.zeros(0, np.int32), 2)
    assert empty.neighbours(1).tolist() == [] and empty.indptr.tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="duplicate entity ids"):
        KnowledgeGraph([Entity("a", "A"), Entity("a", "A2")])


def test_loaded_rows_are_the_same_objects_as_before(tmp_path: Path) -> None:
    folder = generated_kg(tmp_path / "kg", entities=40, triples=100)
    kg = load_knowledge_graph(folder)
    assert kg["e3"] == Entity("e3", "Entity 3", ("E3", "e 3"), "thing", "number 3")
    assert kg.entities[3] == kg["e3"] and list(kg.entities)[3] == kg["e3"]
    first = kg.triples[0]
    assert first.source == f"{folder / 'triples.tsv'}:1"
    assert [t.source.rsplit(":", 1)[1] for t in kg.triples][10:14] == ["11", "14", "15", "16"]


def test_disk_cache_is_keyed_by_content_and_memory_mapped(tmp_path: Path) -> None:
    folder = generated_kg(tmp_path / "kg")
    cache = tmp_path / "cache"
    plain = load_knowledge_graph(folder)
    first = load_knowledge_graph(folder, cache_dir=cache)
    entries = sorted(cache.iterdir())
    assert len(entries) == 1 and (entries[0] / "manifest.json").is_file()
    again = load_knowledge_graph(folder, cache_dir=cache)
    assert isinstance(again.triples.heads, np.memmap)  # read from the cache, not parsed
    assert isinstance(again.adjacency.indices, np.memmap)
    for kg in (first, again):
        assert kg.entity_ids == plain.entity_ids
        assert list(kg.entities) == list(plain.entities)
        assert list(kg.triples) == list(plain.triples)
        assert all(kg.neighbours(e) == plain.neighbours(e) for e in plain.entity_ids)
    # An edited file is a new key: parsed (and validated) again, never served stale.
    triples = folder / "triples.tsv"
    triples.write_text(triples.read_text(encoding="utf-8") + "e1\tnew\te2\n", encoding="utf-8")
    edited = load_knowledge_graph(folder, cache_dir=cache)
    assert len(edited.triples) == len(plain.triples) + 1
    assert len(list(cache.iterdir())) == 2
    triples.write_text(triples.read_text(encoding="utf-8") + "e1\tnew\tzz\n", encoding="utf-8")
    with pytest.raises(KGError, match=r"triples\.tsv:\d+: unknown entity id 'zz'"):
        load_knowledge_graph(folder, cache_dir=cache)
    assert len(list(cache.iterdir())) == 2  # nothing stored for the bad file


def test_bad_line_names_file_and_line_across_read_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graph, "_BLOCK_BYTES", 64)  # many blocks: line numbers carry over
    folder = generated_kg(tmp_path / "kg", entities=50, triples=400)
    triples = folder / "triples.tsv"
    lines = triples.read_text(encoding="utf-8").split("\n")
    good = load_knowledge_graph(folder)
    assert len(good.triples) == 401  # 400 + the duplicate
    lines[299] = "e1\tr\te2\textra"  # line 300: four cells
    triples.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(KGError, match=r"triples\.tsv:300: expected head<TAB>relation<TAB>tail"):
        load_knowledge_graph(folder)
    lines[299] = "e1\tr\te2"
    triples.write_bytes("\n".join(lines).encode() + b"\ne1\tr\t\xff\n")
    with pytest.raises(KGError, match=rf"triples\.tsv:{len(lines) + 1}: not valid UTF-8"):
        load_knowledge_graph(folder)
    entities = folder / "entities.tsv"
    rows = entities.read_text(encoding="utf-8").split("\n")
    rows[40] = "e39\tdup\t\t\t"
    entities.write_text("\n".join(rows), encoding="utf-8")
    with pytest.raises(
        KGError, match=r"entities\.tsv:42: duplicate entity id 'e39' \(first on line 41\)"
    ):
        load_knowledge_graph(folder, cache_dir=tmp_path / "cache")


def test_crlf_bom_and_nul_are_handled_as_before(tmp_path: Path) -> None:
    body = HEADER + "a\tAlpha\t\tAl\t\nb\tBeta\t\t\t\n"
    entities = tmp_path / "entities.tsv"
    entities.write_bytes(b"\xef\xbb\xbf" + body.replace("\n", "\r\n").encode())
    (tmp_path / "triples.tsv").write_text("a\tr\tb\r\n", encoding="utf-8")
    kg = load_knowledge_graph(tmp_path)
    assert kg.entity_ids == ["a", "b"] and kg["a"].aliases == ("Al",)
    assert kg.labeled_triples() == [("a", "r", "b")]
    (tmp_path / "triples.tsv").write_text("a\tr\x00x\tb\n", encoding="utf-8")
    with pytest.raises(KGError, match=r"triples\.tsv:1: NUL character.*field 'relation'"):
        load_knowledge_graph(tmp_path)
