"""Linking at scale: output identical to the former spaCy entity_ruler linker on the sample,
the compact alias index equals the former dict of priors, and linking streams."""

from __future__ import annotations

import hashlib
import itertools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from knowledge_sample_paths import CORPUS

from ptm_core.data import CorpusError
from ptm_knowledge.linking import LEGACY_SETTINGS, EntityLinker, link_corpus
from ptm_knowledge.linking.aliases import (
    ALIAS_WEIGHT,
    CANONICAL_WEIGHT,
    AliasTable,
    alias_key,
    surface_variants,
)
from ptm_knowledge.linking.corpus import iter_linked_documents

# sha256 of link_corpus(data_specs/text_corpus/sample/corpus.txt) written by the linker
# before the scale change (spaCy entity_ruler patterns, AliasTable of dicts, triple scans),
# per case mode. Since #38 (guard, context ranking) these bytes are the output of
# LEGACY_SETTINGS, which must keep reproducing them.
BEFORE = {
    "smart": "0c66882ea40da4d730eaee4bc95450804907e2d168f1778b1dc6e5575adfe844",
    "insensitive": "98716100b6e08a0e6a470c329f849a58b9db841e9dbe234a825fee95b123df2a",
    "sensitive": "b0dddb2d5dcee110ce22cabaa548b9e0679c080c4a79c82585c493b2d89a7683",
}


@pytest.mark.parametrize("case", sorted(BEFORE))
def test_linked_sample_is_byte_identical_to_before(sample_kg, tmp_path: Path, case: str) -> None:
    linker = EntityLinker(sample_kg, case=case, **LEGACY_SETTINGS)
    out = link_corpus(CORPUS, linker, tmp_path / "linked.jsonl")
    assert hashlib.sha256(out.read_bytes()).hexdigest() == BEFORE[case]


@pytest.mark.parametrize("case", ["smart", "insensitive"])
def test_alias_index_equals_the_former_dicts(sample_kg, case: str) -> None:
    weights: dict[str, dict[str, float]] = defaultdict(dict)  # the former construction
    for entity in sample_kg.entities:
        for form in entity.surface_forms:
            key = alias_key(form, case)
            weight = CANONICAL_WEIGHT if form == entity.name else ALIAS_WEIGHT
            weights[key][entity.id] = max(weights[key].get(entity.id, 0.0), weight)
    former = {
        key: [(e, w / sum(by.values())) for e, w in by.items()] for key, by in weights.items()
    }
    forms: dict[str, str] = {}
    for entity in sample_kg.entities:
        for form in entity.surface_forms:
            for variant in surface_variants(form, case):
                forms.setdefault(variant, alias_key(form, case))
    table = AliasTable(sample_kg, case)
    assert {k: [(c.entity_id, c.prior) for c in v] for k, v in table.candidates.items()} == former
    assert table.surface_forms == forms
    assert set(table.ambiguous()) == {k for k, v in former.items() if len(v) > 1}
    assert table.lookup("no such alias") == []


def test_context_bags_are_built_on_demand_from_the_adjacency(sample_kg) -> None:
    linker = EntityLinker(sample_kg)
    bags = linker.aliases.context_bags
    names = " ".join(sample_kg[n].name for n in sample_kg.neighbours("vienna"))
    entity = sample_kg["vienna"]
    expected = linker.content_words(f"{entity.type} {entity.description} {names}")
    assert bags["vienna"] == frozenset(expected) and "danube" in bags["vienna"]
    assert len(bags) == len(sample_kg) and "vienna" in bags and "nowhere" not in bags


def test_linking_is_lazy_over_an_endless_stream(sample_kg) -> None:
    linker = EntityLinker(sample_kg)
    read = 0

    def endless() -> Iterator[tuple[str, list[str]]]:
        nonlocal read
        for i in itertools.count():
            read += 1
            yield f"doc{i}", ["Marie Curie moved to Paris.", "Vienna lies on the Danube."]

    first = list(itertools.islice(iter_linked_documents(endless(), linker, batch_size=4), 6))
    assert [d.doc_id for d in first] == [f"doc{i}" for i in range(6)]
    assert read <= 8  # two batches of four, not the whole (endless) input
    assert [m.entity_id for m in first[0].mentions] == ["marie_curie", "paris", "vienna", "danube"]
    assert [(m.sentence, m.start) for m in first[0].mentions] == [(0, 0), (0, 21), (1, 0), (1, 19)]


def test_bad_corpus_line_fails_with_file_line_and_keeps_the_output(
    sample_kg, tmp_path: Path
) -> None:
    corpus = tmp_path / "bad.jsonl"
    good = '{"text": "Marie Curie lived in Paris."}\n'
    corpus.write_text(good * 40 + '{"txt": "oops"}\n', encoding="utf-8")
    output = tmp_path / "linked.jsonl"
    output.write_text("previous good output\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:41"):
        link_corpus(corpus, EntityLinker(sample_kg), output, batch_size=4)
    assert output.read_text(encoding="utf-8") == "previous good output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "linked.jsonl"]
