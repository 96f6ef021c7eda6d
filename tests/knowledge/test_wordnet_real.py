"""The installed WordNet 3.0 (Debian's wordnet-base): counts and known synsets.

Skipped where /usr/share/wordnet is missing, except on CI (``CI=true``), where ``.ci/run``
installs it and a missing database fails (:func:`wordnet_paths.system_wordnet`).
"""

from __future__ import annotations

import pytest
from wordnet_paths import system_wordnet

from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.kg.wn18rr import WN18RR_RELATIONS, build_wn18rr_style
from ptm_knowledge.kg.wordnet import Pointer, read_wordnet, write_wordnet_kg

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nouns():
    return read_wordnet(system_wordnet())


def test_noun_counts(nouns) -> None:
    assert len(nouns) == 82_115
    assert nouns.pos == ("n",)
    assert len(nouns.index) == 117_798  # index.noun's lemmas
    counts = nouns.relation_counts()
    assert counts["hypernym"] == counts["hyponym"] == 75_850
    assert counts["instance_hypernym"] == 8_577


def test_dog(nouns) -> None:
    dog = nouns["n02084071"]
    assert (dog.lexname, dog.lemmas) == ("noun.animal", ("dog", "domestic_dog", "Canis_familiaris"))
    assert dog.examples == ("the dog barked all night",)
    assert dog.pointers[0] == Pointer("@", "hypernym", "n02083346")
    assert len(dog.pointers) == 23
    assert nouns.senses("dog")[0] == "n02084071"
    assert nouns.sense_counts("dog") == {"n": 42, "v": 2}


def test_full_noun_kg(nouns, tmp_path) -> None:
    written = write_wordnet_kg(nouns, tmp_path)
    kg = load_knowledge_graph(tmp_path)
    assert len(kg) == written.entities == 82_115
    assert len(kg.triples) == written.triples == 230_899
    # fewer than the pointers between nouns: lexical pointers of several word pairs of the
    # same two synsets (derivations, antonyms) are one triple
    between = sum(1 for s in nouns for p in s.pointers if p.target[0] == "n")
    assert between > written.triples
    assert written.relations["_hypernym"] == 75_850
    assert kg["n02084071"].aliases == ("domestic dog", "Canis familiaris")


def test_wn18rr_style_counts_and_no_leakage() -> None:
    built = build_wn18rr_style(read_wordnet(system_wordnet(), pos="nvar"))
    split = built.split
    counts = (len(built.entities), len(split.train), len(split.valid), len(split.test))
    assert counts == (37_914, 91_293, 3_190, 3_295)
    every = [*split.train, *split.valid, *split.test]
    assert {r for _, r, _ in every} == {f"_{r}" for r in WN18RR_RELATIONS}
    train_pairs = {frozenset((h, t)) for h, _, t in split.train}
    train_entities = {e for h, _, t in split.train for e in (h, t)}
    for held in (split.valid, split.test):
        assert not {frozenset((h, t)) for h, _, t in held} & train_pairs
        assert {e for h, _, t in held for e in (h, t)} <= train_entities
