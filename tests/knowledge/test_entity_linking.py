"""spaCy entity linking against the sample KG's alias table."""

from __future__ import annotations

from pathlib import Path

import pytest
from knowledge_sample_paths import CORPUS, KG_DIR

from ptm_knowledge.linking import (
    EntityLinker,
    LinkedCorpusError,
    link_corpus,
    read_linked_corpus,
)
from ptm_knowledge.linking.evaluation import evaluate_linking


@pytest.fixture(scope="module")
def linker(sample_kg) -> EntityLinker:
    return EntityLinker(sample_kg)


def test_precision_recall_on_sample_corpus(linker, sample_kg, tmp_path: Path) -> None:
    out = link_corpus(CORPUS, linker, tmp_path / "linked.jsonl")
    predicted = read_linked_corpus(out, sample_kg.entity_ids)
    gold = read_linked_corpus(KG_DIR / "gold_mentions.jsonl", sample_kg.entity_ids)
    report = evaluate_linking(predicted, gold)
    scores = report.scores("entity")
    print(f"\nlinking on the sample corpus: {report.to_dict()}")
    assert report.gold >= 150
    assert report.counts["unjudged"] == 0  # the sample's gold is complete
    assert scores["precision"] > 0.9
    assert scores["recall"] > 0.9


def test_unknown_names_are_never_linked(linker) -> None:
    text = "Zanzibar and Quetzalcoatl met Marie Curie in Timbuktu with a Parisian Viennese waltz."
    mentions = linker.link(text)
    assert [(m.text, m.entity_id) for m in mentions] == [("Marie Curie", "marie_curie")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("In 1891 she moved to Paris, the capital of France, to study at the Sorbonne.", "paris"),
        ("Paris, the Trojan son of Priam, carried Helen away from Sparta.", "paris_of_troy"),
        (
            "Curie and her husband discovered polonium and radium; she won two Nobel prizes.",
            "marie_curie",
        ),
        ("Curie, who studied crystals and magnetism, died in a street accident.", "pierre_curie"),
    ],
)
def test_ambiguous_alias_resolved_by_context(linker, text: str, expected: str) -> None:
    mention = linker.link(text)[0]
    assert mention.text in ("Paris", "Curie")
    assert len(mention.candidates) == 2  # the alias really is ambiguous
    assert mention.entity_id == expected


def test_ambiguous_alias_without_context_is_not_linked(sample_kg) -> None:
    # Equal priors (0.5 each) and no context: the best score 0.25 is under the threshold.
    strict = EntityLinker(sample_kg, threshold=0.3)
    assert strict.link("Curie smiled.") == []


def test_longest_match_and_case_modes(sample_kg, linker) -> None:
    found = [(m.text, m.entity_id) for m in linker.link("The Danube Delta shelters pelicans.")]
    assert found == [("Danube Delta", "danube_delta")]
    # smart: capitalised aliases match exactly, lower-case ones also sentence-initially.
    smart = [m.entity_id for m in linker.link("Polonium and radium. The marathon at Marathon.")]
    assert smart == ["polonium", "radium", "marathon_greece"]
    insensitive = EntityLinker(sample_kg, case="insensitive")
    found = [m.entity_id for m in insensitive.link("the marathon at MARATHON")]
    assert found == ["marathon_greece", "marathon_greece"]
    sensitive = EntityLinker(sample_kg, case="sensitive")
    assert [m.entity_id for m in sensitive.link("Polonium and polonium")] == ["polonium"]


def test_pipe_batches_match_single_calls(linker) -> None:
    texts = ["Vienna lies on the Danube.", "Mozart was born in Salzburg.", "No names here."]
    assert list(linker.link_batch(texts, batch_size=2)) == [linker.link(t) for t in texts]


def test_linked_corpus_errors_name_file_and_line(tmp_path: Path) -> None:
    good = '{"id": "a", "sentences": ["Vienna is big."], "mentions": []}\n'
    bad = (
        '{"id": "b", "sentences": ["Vienna is big."], "mentions": '
        '[{"sentence": 0, "start": 0, "end": 6, "text": "Vienne", "entity": "vienna"}]}\n'
    )
    path = tmp_path / "c.jsonl"
    path.write_text(good + "\n" + bad)
    with pytest.raises(LinkedCorpusError, match=r"c\.jsonl:3: span reads 'Vienna', not 'Vienne'"):
        read_linked_corpus(path)
    path.write_text(good.replace("[]", '[{"sentence": 0, "start": 0, "end": 6, "entity": "x"}]'))
    with pytest.raises(LinkedCorpusError, match=r"c\.jsonl:1: unknown entity id 'x'"):
        read_linked_corpus(path, ["vienna"])
    path.write_text(good + good)
    with pytest.raises(LinkedCorpusError, match=r"c\.jsonl:2: duplicate id 'a'"):
        read_linked_corpus(path)
