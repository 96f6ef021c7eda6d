"""`evaluate_linking`, `calibrate_nil_threshold`, the gloss gold and `ptm evaluate-linking`
against figures computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from ptm_knowledge.kg.wordnet import read_wordnet
from ptm_knowledge.linking import LinkedCorpusError, read_linked_corpus
from ptm_knowledge.linking.corpus import LinkedDocument, SentenceMention
from ptm_knowledge.linking.evaluation import (
    calibrate_nil_threshold,
    evaluate_linking,
    wordnet_gloss_gold,
)

FIXTURE = Path(__file__).parent / "fixtures" / "wordnet"
SAMPLE_KG = Path(__file__).resolve().parents[2] / "data_specs" / "knowledge_graph" / "sample"

A = "Marie Curie moved to Paris in 1891."
B = "The dog chased a cat near the river bank."


def _m(start: int, end: int, entity: str, score: float | None = None) -> SentenceMention:
    return SentenceMention(0, start, end, entity, score)


GOLD = [
    LinkedDocument("a", [A], [_m(0, 11, "curie"), _m(21, 26, "paris")]),  # complete
    LinkedDocument("b", [B], [_m(4, 7, "dog"), _m(17, 20, "cat")], complete=False),
]
PREDICTED = [
    LinkedDocument(
        "a",
        [A],
        [
            _m(0, 11, "curie", 0.9),  # correct
            _m(21, 26, "paris_texas", 0.8),  # wrong entity (gold span, other entity)
            _m(30, 34, "year_1891", 0.2),  # spurious: no gold overlap, complete document
        ],
    ),
    LinkedDocument(
        "b",
        [B],
        [
            _m(4, 7, "dog", 0.7),  # correct
            _m(17, 24, "cat_near", 0.6),  # wrong span: overlaps gold "cat" [17, 20)
            _m(30, 40, "river_bank", 0.5),  # unjudged: no gold overlap, partial document
        ],
    ),
]


def test_every_outcome_counted_as_by_hand() -> None:
    report = evaluate_linking(PREDICTED, GOLD)
    assert report.counts == {
        "correct": 2,
        "wrong_entity": 1,
        "wrong_span": 1,
        "spurious": 1,
        "unjudged": 1,
    }
    assert (report.gold, report.linked, report.judged, report.missed) == (4, 6, 5, 2)
    # span: right = correct + wrong entity = 3 of 5 judged, 3 of 4 gold
    span = report.scores("span")
    assert span["precision"] == pytest.approx(3 / 5)
    assert span["recall"] == pytest.approx(3 / 4)
    assert span["f1"] == pytest.approx(2 * 0.6 * 0.75 / 1.35)  # 0.6667
    # span + entity: 2 of 5 judged, 2 of 4 gold
    entity = report.scores("entity")
    assert entity["precision"] == pytest.approx(2 / 5)
    assert entity["recall"] == pytest.approx(2 / 4)
    assert entity["f1"] == pytest.approx(2 * 0.4 * 0.5 / 0.9)  # 0.4444
    errors = {(e["id"], e["error"], e["linked"], e["gold"]) for e in report.examples}
    assert errors == {
        ("a", "wrong_entity", "paris_texas", "paris"),
        ("a", "spurious", "year_1891", None),
        ("b", "wrong_span", "cat_near", "cat"),
    }


def test_threshold_drops_low_scores() -> None:
    # 0.55 drops the spurious (0.2) and the unjudged (0.5) link: 2 correct of 4 judged
    report = evaluate_linking(PREDICTED, GOLD, threshold=0.55)
    assert (report.linked, report.judged, report.counts["spurious"]) == (4, 4, 0)
    assert report.scores("entity")["precision"] == pytest.approx(0.5)
    assert report.scores("span")["precision"] == pytest.approx(0.75)


def test_a_partial_document_made_complete_turns_unjudged_into_spurious() -> None:
    complete = [LinkedDocument(d.doc_id, d.sentences, d.mentions) for d in GOLD]
    report = evaluate_linking(PREDICTED, complete)
    assert (report.counts["unjudged"], report.counts["spurious"]) == (0, 2)
    assert report.scores("entity")["precision"] == pytest.approx(2 / 6)


def test_calibration_sweep_as_by_hand() -> None:
    # scores, best first: .9 correct, .8 wrong entity, .7 correct, .6 wrong span,
    # .5 unjudged, .2 spurious; F1 at t: .9 -> P 1 R .25 F1 .4; .8 -> .5/.25 .3333;
    # .7 -> 2/3, .5, .5714 (best); .6 -> .5/.5 .5; .5 -> still 2/4 judged, .5; .2 -> .4/.5 .4444
    best, table = calibrate_nil_threshold(PREDICTED, GOLD)
    assert best == pytest.approx(0.7)
    f1 = {row["threshold"]: row["f1"] for row in table}
    assert f1 == pytest.approx(
        {0.9: 0.4, 0.8: 0.3333, 0.7: 0.5714, 0.6: 0.5, 0.5: 0.5, 0.2: 0.4444}
    )
    # strict: the unjudged link counts as wrong: at .5, 2 of 5 -> F1 .4444 (was .5)
    _, strict = calibrate_nil_threshold(PREDICTED, GOLD, strict=True)
    assert {r["threshold"]: r["f1"] for r in strict}[0.5] == pytest.approx(0.4444)


def test_documents_are_matched_by_id() -> None:
    with pytest.raises(
        ValueError, match=r"1 document id\(s\) in the gold but not in the predictions: 'b'"
    ):
        evaluate_linking(PREDICTED[:1], GOLD)
    other = [PREDICTED[0], LinkedDocument("c", [B])]
    with pytest.raises(ValueError, match="in the predictions but not in the gold: 'c'"):
        evaluate_linking(other, GOLD[:1])
    changed = [PREDICTED[0], LinkedDocument("b", ["Another sentence."])]
    with pytest.raises(ValueError, match="document 'b': the predictions' sentences differ"):
        evaluate_linking(changed, GOLD)


def test_complete_must_be_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "gold.jsonl"
    path.write_text(json.dumps({"id": "x", "sentences": ["A b."], "complete": "no"}) + "\n")
    with pytest.raises(LinkedCorpusError, match=r"gold.jsonl:1.*complete"):
        read_linked_corpus(path)
    path.write_text(json.dumps({"id": "x", "sentences": ["A b."], "complete": False}) + "\n")
    (doc,) = read_linked_corpus(path)
    assert doc.complete is False
    assert doc.to_json()["complete"] is False


def test_wordnet_gloss_gold_on_the_fixture() -> None:
    gold = {doc.doc_id: doc for doc in wordnet_gloss_gold(read_wordnet(FIXTURE))}
    dog_sense = gold["n00005216"]  # "a dog used in hunting game"; it points to dog n00004610
    assert dog_sense.complete is False
    assert [(m.start, m.end, m.entity_id) for m in dog_sense.mentions] == [(2, 5, "n00004610")]
    # a multi-word lemma is one mention, the longest match
    canis = gold["n00004610"]
    assert [canis.sentences[0][m.start : m.end] for m in canis.mentions] == ["genus Canis"]
    for doc in gold.values():
        for m in doc.mentions:
            assert m.entity_id != doc.doc_id


def test_cli_scores_a_prediction_file_and_calibrates(tmp_path: Path, capsys) -> None:
    gold_path, pred_path = tmp_path / "gold.jsonl", tmp_path / "linked.jsonl"
    gold_path.write_text("".join(json.dumps(d.to_json()) + "\n" for d in GOLD))
    pred_path.write_text("".join(json.dumps(d.to_json()) + "\n" for d in PREDICTED))
    report_path = tmp_path / "report.json"
    code = main(
        [
            "evaluate-linking",
            "--gold",
            str(gold_path),
            "--predictions",
            str(pred_path),
            "--calibrate",
            "--report",
            str(report_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "span + entity        0.400   0.500   0.444" in out
    assert "calibrated NIL threshold 0.7" in out
    report = json.loads(report_path.read_text())
    assert report["errors"] == {
        "wrong_span": 1,
        "wrong_entity": 1,
        "spurious": 1,
        "missed": 2,
        "unjudged": 1,
    }
    assert report["calibration"]["threshold"] == pytest.approx(0.7)


def test_cli_links_the_gold_itself_and_names_bad_input(tmp_path: Path, capsys) -> None:
    gold = str(SAMPLE_KG / "gold_mentions.jsonl")
    assert main(["evaluate-linking", "--gold", gold, "--kg", str(SAMPLE_KG)]) == 0
    out = capsys.readouterr().out
    assert "NIL threshold" in out and "span + entity" in out
    missing = tmp_path / "none.jsonl"
    assert main(["evaluate-linking", "--gold", gold, "--predictions", str(missing)]) == 1
    assert "none.jsonl" in capsys.readouterr().err
