"""The installed WordNet 3.0 (Debian's wordnet-base): counts and known synsets.

Skipped where /usr/share/wordnet is missing, except on CI (``CI=true``), where ``.ci/run``
installs it and a missing database fails (:func:`wordnet_paths.system_wordnet`).
"""

from __future__ import annotations

import pytest
from wordnet_paths import system_wordnet

from ptm_knowledge.kg.wordnet import Pointer, read_wordnet

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
