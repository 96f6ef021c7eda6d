"""WordNet -> ptm's KG format, and the WN18RR-style benchmark, on the fixture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wordnet_paths import FIXTURE

from ptm_knowledge.kg import Entity, load_knowledge_graph
from ptm_knowledge.kg.wn18rr import (
    WN18RR_RELATIONS,
    Split,
    build_wn18rr_style,
    split_triples,
    write_wn18rr_style,
)
from ptm_knowledge.kg.wordnet import read_wordnet, wordnet_triples, write_wordnet_kg

DOG = "n00004610"


@pytest.fixture(scope="module")
def wordnet():
    return read_wordnet(FIXTURE, pos="nvar")


def test_kg_round_trip(wordnet, tmp_path: Path) -> None:
    written = write_wordnet_kg(wordnet, tmp_path / "kg")
    kg = load_knowledge_graph(tmp_path / "kg")
    assert len(kg) == written.entities == 51
    assert kg.entity_ids == list(wordnet.synsets)
    assert kg[DOG] == Entity(
        DOG,
        "dog",
        ("domestic dog", "Canis familiaris"),
        "noun.animal",
        wordnet[DOG].definition,
    )
    pointers = {(s.id, f"_{p.relation}", p.target) for s in wordnet for p in s.pointers}
    assert set(kg.labeled_triples()) == pointers
    assert len(kg.triples) == written.triples == len(pointers)  # each triple once
    assert (DOG, "_hypernym", "n00004221") in pointers
    assert written.relations["_hypernym"] == 12 and sum(written.relations.values()) == 78


def test_kg_of_some_synsets_and_relations(wordnet, tmp_path: Path) -> None:
    keep = [DOG, "n00004221", "n00005001", "n00005899"]
    written = write_wordnet_kg(wordnet, tmp_path, keep=keep, relations=["hypernym", "has_part"])
    kg = load_knowledge_graph(tmp_path)
    assert kg.entity_ids == sorted(keep, key=list(wordnet.synsets).index)
    assert sorted(kg.labeled_triples()) == [
        (DOG, "_has_part", "n00005899"),
        (DOG, "_hypernym", "n00004221"),
        ("n00005001", "_hypernym", DOG),
    ]
    assert written.relations == {"_hypernym": 2, "_has_part": 1}
    with pytest.raises(ValueError, match="'n99999999' to keep is not in the WordNet read"):
        write_wordnet_kg(wordnet, tmp_path, keep=["n99999999"])


def test_lexical_pointers_become_one_synset_triple(wordnet) -> None:
    triples = wordnet_triples(wordnet, relations=["derivationally_related_form"])
    assert ("n00001740", "_derivationally_related_form", "v00003272") in triples
    assert len(triples) == len(set(triples))


def _pairs(triples):
    return {frozenset((h, t)) for h, _, t in triples}


def _check_split(split: Split) -> None:
    train_pairs = _pairs(split.train)
    train_entities = {e for h, _, t in split.train for e in (h, t)}
    for held in (split.valid, split.test):
        assert not _pairs(held) & train_pairs  # no reverse / inverse twin in train
        assert {e for h, _, t in held for e in (h, t)} <= train_entities
    assert not _pairs(split.valid) & _pairs(split.test)


def test_wn18rr_style_on_the_fixture(wordnet) -> None:
    built = build_wn18rr_style(wordnet, min_triples=1, valid_size=2, test_size=2)
    every = [*built.split.train, *built.split.valid, *built.split.test]
    assert {r for _, r, _ in every} == {f"_{r}" for r in WN18RR_RELATIONS}
    assert len(WN18RR_RELATIONS) == 11
    assert (len(built.split.valid), len(built.split.test)) == (2, 2)
    assert len(every) == len(set(every)) == 42
    assert set(built.entities) == {e for h, _, t in every for e in (h, t)}
    _check_split(built.split)
    assert build_wn18rr_style(wordnet, min_triples=1, valid_size=2, test_size=2) == built
    others = [
        build_wn18rr_style(wordnet, seed=seed, min_triples=1, valid_size=2, test_size=2)
        for seed in (1, 2)
    ]
    assert any(o.split.test != built.split.test for o in others)
    for other in others:
        _check_split(other.split)


def test_wn18_selection_threshold(wordnet) -> None:
    assert len(build_wn18rr_style(wordnet, min_triples=1).entities) == 39
    fewer = build_wn18rr_style(wordnet, min_triples=3).entities
    assert len(fewer) == 16 and DOG in fewer and "n00005899" not in fewer  # flag: 2 triples
    with pytest.raises(ValueError, match="min_triples must be >= 1"):
        build_wn18rr_style(wordnet, min_triples=0)


def test_wn18rr_needs_every_part_of_speech() -> None:
    with pytest.raises(ValueError, match=r"needs every part of speech.*--pos all"):
        build_wn18rr_style(read_wordnet(FIXTURE))


def test_split_keeps_reverse_pairs_together_and_entities_seen() -> None:
    triples = [
        ("a", "_similar_to", "b"),
        ("b", "_similar_to", "a"),
        ("a", "_hypernym", "c"),
        ("b", "_hypernym", "c"),
        ("c", "_hypernym", "d"),
        ("e", "_hypernym", "d"),
    ]
    for seed in range(20):
        split = split_triples(triples, seed=seed, valid_size=1, test_size=2)
        _check_split(split)
        assert sorted([*split.train, *split.valid, *split.test]) == sorted(triples)
        assert ("e", "_hypernym", "d") in split.train  # e's only triple
        held = {*split.valid, *split.test}
        assert (("a", "_similar_to", "b") in held) == (("b", "_similar_to", "a") in held)
    with pytest.raises(ValueError, match="split sizes must be >= 0"):
        split_triples(triples, valid_size=-1, test_size=0)


def test_triple_grouping_splits_reverse_pairs_as_wn18rr_did() -> None:
    # 30 symmetric pairs around a hub: "pair" never splits a pair, "triple" (WN18RR's way)
    # puts the reverse of some held-out triples in train; entities stay seen either way.
    triples = [("hub", "_hypernym", f"x{i}") for i in range(30)]
    for i in range(30):
        triples += [(f"x{i}", "_similar_to", f"y{i}"), (f"y{i}", "_similar_to", f"x{i}")]
    triples += [(f"y{i}", "_hypernym", "hub") for i in range(30)]

    def leaked(split) -> int:
        train = set(split.train)
        return sum((t, r, h) in train for h, r, t in split.test if r == "_similar_to")

    pair = split_triples(triples, seed=0, valid_size=5, test_size=10)
    triple = split_triples(triples, seed=0, valid_size=5, test_size=10, grouping="triple")
    _check_split(pair)
    for split in (pair, triple):
        train_entities = {e for h, _, t in split.train for e in (h, t)}
        assert {e for h, _, t in [*split.valid, *split.test] for e in (h, t)} <= train_entities
        assert sorted([*split.train, *split.valid, *split.test]) == sorted(triples)
        assert len(split.test) == 10
    assert leaked(pair) == 0
    assert leaked(triple) > 0
    assert split_triples(triples, seed=0, valid_size=5, test_size=10) == pair  # default
    with pytest.raises(ValueError, match="grouping is 'edge'; use one of pair, triple"):
        split_triples(triples, valid_size=1, test_size=1, grouping="edge")


def test_write_wn18rr_style(wordnet, tmp_path: Path) -> None:
    built = write_wn18rr_style(wordnet, tmp_path, seed=3, min_triples=1, valid_size=2, test_size=3)
    for name in ("train", "valid", "test"):
        lines = (tmp_path / f"{name}.tsv").read_text(encoding="utf-8").splitlines()
        assert [tuple(line.split("\t")) for line in lines] == getattr(built.split, name)
    kg = load_knowledge_graph(tmp_path)  # entities.tsv + triples.tsv (= train)
    assert kg.labeled_triples() == built.split.train
    assert kg.entity_ids == built.entities
    summary = json.loads((tmp_path / "wn18rr.json").read_text(encoding="utf-8"))
    assert (summary["valid"], summary["test"], summary["entities"]) == (2, 3, 39)
    assert summary["settings"] == {
        "grouping": "pair",
        "seed": 3,
        "min_triples": 1,
        "valid_size": 2,
        "test_size": 3,
    }
    assert summary["wn18rr_published"]["train"] == 86_835
