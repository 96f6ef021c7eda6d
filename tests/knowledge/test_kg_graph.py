"""Entity table and triples: the sample loads; malformed files fail with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_sample_paths import KG_DIR

from ptm_knowledge.kg import KGError, load_knowledge_graph, read_entity_table, read_triples

HEADER = "id\tname\ttype\taliases\tdescription\n"


def test_sample_kg_loads(sample_kg) -> None:
    assert len(sample_kg) > 100
    assert len(sample_kg.triples) > 200
    paris = sample_kg["paris"]
    assert paris.surface_forms[0] == "Paris"
    assert "Paris" in sample_kg["paris_of_troy"].aliases  # the ambiguous alias
    assert set(sample_kg.neighbours("vienna")) >= {"austria", "danube"}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, "e.tsv", HEADER + "a\tA\t\t\t\n# comment\na\tA2\t\t\t\n")
    with pytest.raises(KGError, match=r"e\.tsv:4: duplicate entity id 'a' \(first on line 2\)"):
        read_entity_table(path)


@pytest.mark.parametrize(
    ("body", "pattern"),
    [
        ("a\tA\n", r":2: expected 5 tab-separated columns.*field 'columns'"),
        ("a b\tA\t\t\t\n", r":2: bad entity id.*field 'id'"),
        ("a\t\t\t\t\n", r":2: empty canonical name.*field 'name'"),
    ],
)
def test_malformed_entity_lines(tmp_path: Path, body: str, pattern: str) -> None:
    with pytest.raises(KGError, match=pattern):
        read_entity_table(_write(tmp_path, "e.tsv", HEADER + body))


def test_missing_header(tmp_path: Path) -> None:
    with pytest.raises(KGError, match=r"e\.tsv:1: expected the header"):
        read_entity_table(_write(tmp_path, "e.tsv", "a\tA\t\t\t\n"))


def test_unknown_and_malformed_triples(tmp_path: Path) -> None:
    ids = {"a", "b"}
    path = _write(tmp_path, "t.tsv", "a\tr\tb\n\na\tr\tzz\n")
    with pytest.raises(KGError, match=r"t\.tsv:3: unknown entity id 'zz' \(field 'tail'\)"):
        read_triples(path, ids)
    path = _write(tmp_path, "t2.tsv", "a\tr\n")
    with pytest.raises(KGError, match=r"t2\.tsv:1: expected head<TAB>relation<TAB>tail"):
        read_triples(path, ids)


def test_directory_and_aliases(tmp_path: Path) -> None:
    _write(tmp_path, "entities.tsv", HEADER + "a\tAlpha\tthing\tAl| A. \tfirst\nb\tBeta\t\t\t\n")
    _write(tmp_path, "triples.tsv", "a\tnext\tb\n")
    kg = load_knowledge_graph(tmp_path)
    assert kg.entity_ids == ["a", "b"]
    assert kg["a"].surface_forms == ("Alpha", "Al", "A.")
    assert kg.labeled_triples() == [("a", "next", "b")]


def test_sample_files_exist() -> None:
    assert (KG_DIR / "entities.tsv").is_file() and (KG_DIR / "triples.tsv").is_file()
