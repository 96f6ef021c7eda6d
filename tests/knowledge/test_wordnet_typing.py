"""The WordNet entity-typing task on the WordNet fixture: held out, balanced, deterministic."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from wordnet_paths import FIXTURE

from ptm_core.finetune.data import read_glue
from ptm_knowledge.kg.wordnet import read_wordnet
from ptm_knowledge.kg.wordnet_typing import build_wordnet_typing, typed_synsets


@pytest.fixture(scope="module")
def wordnet():
    return read_wordnet(FIXTURE)


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[\w'-]+", text)}


def test_dev_and_test_entities_are_held_out(wordnet) -> None:
    task = build_wordnet_typing(wordnet, labels=2, sentences=3)
    ids = {split: {e.entity_id for e in group} for split, group in task.entities.items()}
    assert ids["dev"] and ids["test"] and ids["train"]
    assert not ids["train"] & ids["dev"] and not ids["train"] & ids["test"]
    assert not ids["dev"] & ids["test"]
    train_words = set().union(*(_words(r.sentence) for r in task.splits["train"]))
    for split in ("dev", "test"):
        for entity in task.entities[split]:
            # no word of any of its lemmas reaches a training sentence
            lemmas = wordnet[entity.entity_id].lemmas
            assert not set().union(*(_words(lem.replace("_", " ")) for lem in lemmas)) & train_words
        for row in task.splits[split]:
            assert row.entity_id in ids[split]


def test_labels_are_balanced_lexnames(wordnet) -> None:
    task = build_wordnet_typing(wordnet, labels=2, sentences=3)
    assert task.labels == ("noun.animal", "noun.act")  # the two most frequent in the fixture
    for split, rows in task.splits.items():
        counts = Counter(r.label for r in rows)
        assert set(counts) == set(task.labels) and len(set(counts.values())) == 1, split
        for row in rows:
            assert row.label == wordnet[row.entity_id].lexname
    for entity in typed_synsets(wordnet):
        assert len(wordnet.senses(entity.surface, "n")) == 1  # the surface names one synset


def test_each_sentence_mentions_its_entity(wordnet) -> None:
    task = build_wordnet_typing(wordnet, labels=2, sentences=3)
    surface = {e.entity_id: e.surface for group in task.entities.values() for e in group}
    for rows in task.splits.values():
        for row in rows:
            assert surface[row.entity_id].lower() in row.sentence.lower()


def test_deterministic_and_readable(wordnet, tmp_path: Path) -> None:
    first = build_wordnet_typing(wordnet, labels=2, seed=3).write(tmp_path / "a")
    second = build_wordnet_typing(read_wordnet(FIXTURE), labels=2, seed=3).write(tmp_path / "b")
    for split in ("train", "dev", "test"):
        assert first[split].read_bytes() == second[split].read_bytes()
    other = build_wordnet_typing(wordnet, labels=2, seed=4).write(tmp_path / "c")
    assert other["train"].read_bytes() != first["train"].read_bytes()
    data = read_glue(first["dev"], text_fields=["sentence"], label_field="label")
    assert set(data.label_names) == {"noun.animal", "noun.act"}


def test_bad_arguments_are_named(wordnet) -> None:
    with pytest.raises(ValueError, match=r"lexname 'noun\.feeling'"):
        build_wordnet_typing(wordnet, labels=["noun.animal", "noun.feeling"])
    with pytest.raises(ValueError, match="per_label=99"):
        build_wordnet_typing(wordnet, labels=2, per_label=99)
    with pytest.raises(ValueError, match="held_out"):
        build_wordnet_typing(wordnet, labels=2, held_out=0.6)
