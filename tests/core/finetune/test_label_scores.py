"""Per-label scores and confusion matrices of dev predictions (the fine-tuning label report)."""

from __future__ import annotations

import pytest
from seqeval.metrics import classification_report

from ptm_core.finetune.label_scores import NO_LABEL, LabelledPredictions, label_scores


def test_classification_counts_examples_and_scores_each_label() -> None:
    names = ["cat", "dog", "eel", "fox"]  # fox: a training label with no dev example
    gold = [0, 0, 0, 1, 1, 2]
    pred = [0, 1, 0, 1, 3, 2]
    predictions = LabelledPredictions(pred, gold, names, "classification")
    assert list(predictions) == pred  # still the plain list of predictions
    scores = label_scores(predictions)
    assert scores["labels"] == names and scores["unit"] == "examples"
    assert scores["confusion"] == [[2, 1, 0, 0], [0, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 0]]
    rows = {r["label"]: r for r in scores["per_label"]}
    assert rows["cat"] == {
        "label": "cat",
        "precision": 1.0,
        "recall": 2 / 3,
        "f1": pytest.approx(0.8),
        "support": 3,
    }
    assert rows["dog"]["precision"] == 0.5 and rows["dog"]["recall"] == 0.5
    # Never in dev: it cannot be recalled (None, not 0), yet it was predicted once, wrongly.
    assert rows["fox"] == {
        "label": "fox",
        "precision": 0.0,
        "recall": None,
        "f1": None,
        "support": 0,
    }


def test_tagging_counts_words_and_scores_entities_as_seqeval_does() -> None:
    names = ["O", "B-PER", "I-PER", "B-LOC", "B-ORG"]
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-LOC", "O"], ["B-PER", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-PER"], ["B-LOC", "O"], ["B-PER", "B-ORG"]]
    scores = label_scores(LabelledPredictions(pred, gold, names, "tagging"))
    assert scores["unit"] == "words" and scores["per_label_unit"] == "entities"
    confusion = scores["confusion"]
    assert sum(map(sum, confusion)) == 8  # words
    assert confusion[names.index("B-LOC")][names.index("B-PER")] == 1
    assert confusion[names.index("O")][names.index("B-ORG")] == 1
    expected = classification_report(gold, pred, output_dict=True, zero_division=0)
    rows = {r["label"]: r for r in scores["per_label"]}
    assert sorted(rows) == ["LOC", "ORG", "PER"]
    for name in ("LOC", "PER"):
        for key in ("precision", "recall", "f1"):
            theirs = expected[name]["f1-score" if key == "f1" else key]
            assert rows[name][key] == pytest.approx(theirs), (name, key)
        assert rows[name]["support"] == expected[name]["support"]
    assert rows["ORG"] == {
        "label": "ORG",
        "precision": 0.0,
        "recall": None,
        "f1": None,
        "support": 0,
    }


def test_label_names_and_generations_that_are_no_label() -> None:
    """Image-text tasks predict label names; text-to-text predicts -1 for a generation that
    is no label: the matrix gets a "(not a label)" column, but no row of per-label scores."""
    names = ["neg", "pos"]
    by_name = label_scores(
        LabelledPredictions(["pos", "neg", "pos"], ["pos", "pos", "pos"], names, "classification")
    )
    assert by_name["confusion"] == [[0, 0], [1, 2]]
    generated = label_scores(LabelledPredictions([1, -1, 0], [1, 1, 0], names, "classification"))
    assert generated["labels"] == ["neg", "pos", NO_LABEL]
    assert generated["confusion"] == [[1, 0, 0], [0, 1, 1], [0, 0, 0]]
    rows = {r["label"]: r for r in generated["per_label"]}
    assert sorted(rows) == ["neg", "pos"]
    assert rows["pos"]["recall"] == 0.5 and rows["pos"]["precision"] == 1.0
