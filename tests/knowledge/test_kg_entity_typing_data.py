"""The KG entity-typing sample (data_specs/kg_entity_typing): deterministic, labels that
follow the KG, dev entities unseen in training, one linkable mention per row."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from knowledge_sample_paths import KG_DIR, ROOT

from benchmarks.fixtures import load_script
from ptm_core.finetune.data import read_glue
from ptm_knowledge.kbert import read_labeled_tsv

DATA = ROOT / "data_specs" / "kg_entity_typing"


gen = load_script(DATA / "make_sample.py", "kg_entity_typing_sample")


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path: Path):
    first = gen.make_sample(tmp_path / "a")
    second = gen.make_sample(tmp_path / "b")
    for split in ("train", "dev"):
        text = first[split].read_bytes()
        assert text == second[split].read_bytes()
        assert text == (DATA / f"{split}.tsv").read_bytes(), f"{split}.tsv: rerun make_sample.py"
    other = gen.make_sample(tmp_path / "c", seed=gen.SEED + 1)
    assert other["dev"].read_bytes() != first["dev"].read_bytes()


def test_labels_follow_the_kg_types_and_dev_entities_are_unseen(sample_kg):
    types = {}
    for entity_id, type_ in zip(sample_kg.entity_ids, sample_kg.entities.types, strict=True):
        types[entity_id] = type_
    entities = gen.typed_entities(KG_DIR)
    assert {e.label for e in entities} == {"person", "city", "country"}
    for entity in entities:
        assert gen.LABELS[entity.label] == (types[entity.entity_id],)
    assert "paris" not in {e.entity_id for e in entities}  # "Paris" is also Paris of Troy
    train, dev = gen.split_entities(entities)
    assert not {e.entity_id for e in train} & {e.entity_id for e in dev}
    assert {e.label for e in dev} == {"person", "city", "country"}
    train_text = (DATA / "train.tsv").read_text(encoding="utf-8")
    for entity in dev:
        assert entity.name not in train_text
    label_of = {e.name: e.label for e in entities}
    for split in ("train", "dev"):
        examples = read_glue(DATA / f"{split}.tsv", text_fields=["sentence"])
        names = examples.label_names
        for example in examples:
            named = [n for n in label_of if n in example.text]
            assert len(named) == 1, example.text
            assert names[example.label] == label_of[named[0]]


def test_both_readers_and_the_linker_agree_on_every_row(sample_kg):
    """K-BERT's reader reads the same rows; the linker finds exactly the named entity."""
    from ptm_knowledge.linking import EntityLinker

    by_name = {e.name: e.entity_id for e in gen.typed_entities(KG_DIR)}
    linker = EntityLinker(sample_kg)
    for split in ("train", "dev"):
        glue = read_glue(DATA / f"{split}.tsv", text_fields=["sentence"])
        kbert, labels = read_labeled_tsv(DATA / f"{split}.tsv", glue.label_names)
        assert len(kbert) == len(glue) and labels == glue.label_names
        assert Counter(e.label for e in kbert) == Counter(e.label for e in glue)
        texts = [e.text for e in glue]
        for text, mentions in zip(texts, linker.link_batch(texts), strict=True):
            expected = [by_name[n] for n in by_name if n in text]
            assert [m.entity_id for m in mentions] == expected, text
