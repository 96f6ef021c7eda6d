"""Downstream metrics against values computed by hand, and the official SQuAD normalisation."""

from __future__ import annotations

import numpy as np
import pytest

from ptm_core.finetune.metrics import compute_metrics, normalize_answer, squad_exact, squad_f1


def test_binary_classification_by_hand() -> None:
    predictions = np.array([1, 0, 1, 1, 0, 1])
    references = [1, 0, 0, 1, 0, 0]
    # class 1: TP 2, FP 2, FN 0, TN 2
    result = compute_metrics("classification", predictions, references, num_labels=2)
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["f1"] == pytest.approx(2 * 2 / (2 * 2 + 2 + 0))
    assert result["matthews_corrcoef"] == pytest.approx((2 * 2 - 2 * 0) / np.sqrt(4 * 2 * 4 * 2))
    # class 0: TP 2, FP 0, FN 2 -> F1 2/3; class 1: 2/3
    assert result["f1_macro"] == pytest.approx(2 / 3)


def test_multiclass_f1_is_macro() -> None:
    predictions = [0, 1, 2, 2, 1, 0]
    references = [0, 1, 1, 2, 2, 0]
    result = compute_metrics("classification", predictions, references)
    # per class F1: 1, 2*1/(2+1+1) = 0.5, 0.5
    assert result["f1"] == result["f1_macro"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert result["accuracy"] == pytest.approx(4 / 6)


def test_regression_correlations_by_hand() -> None:
    result = compute_metrics("regression", [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0])
    # deviations (-1.5, -.5, .5, 1.5) and (-1.5, .5, -.5, 1.5): covariance 4, variances 5
    assert result["pearson"] == pytest.approx(4 / 5)
    # rank differences (0, -1, 1, 0): 1 - 6 * 2 / (4 * (16 - 1))
    assert result["spearman"] == pytest.approx(1 - 6 * 2 / (4 * 15))
    assert result["mse"] == pytest.approx(0.5)


def test_entity_f1_by_hand() -> None:
    references = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predictions = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    result = compute_metrics("tagging", predictions, references)
    # gold {PER 0-1, LOC 3, ORG 0'}; predicted {PER 0-1, ORG 3, ORG 0'}; 2 right
    assert result["precision"] == pytest.approx(2 / 3)
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(2 / 3)
    assert result["accuracy"] == pytest.approx(5 / 6)
    # conlleval (the default) reads an entity starting at I-PER; strict IOB2 does not
    lenient = compute_metrics("tagging", [["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])
    strict = compute_metrics(
        "tagging", [["I-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]], strict=True
    )
    assert lenient["f1"] == 1.0 and strict["f1"] == 0.0
    # a partly found entity is wrong at the entity level
    partial = compute_metrics("tagging", [["B-PER", "O", "O"]], [["B-PER", "I-PER", "O"]])
    assert partial["f1"] == 0.0 and partial["accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("The Eiffel Tower", "eiffel tower"),  # lowercase, article removed
        ("an apple a day", "apple day"),
        ("Theatre of Another Age", "theatre of another age"),  # articles only as whole words
        ("  Warsaw,\tPoland!! ", "warsaw poland"),  # punctuation dropped, white space collapsed
        ("A.D. 1867", "ad 1867"),  # "A.D." -> "ad", not an article after punctuation goes
        ("Berners-Lee's", "bernerslees"),  # punctuation removed inside words, not split
        ("the", ""),
        ("«Curie»", "«curie»"),  # only ASCII string.punctuation, as the official script
    ],
)
def test_official_squad_normalisation(text: str, normalised: str) -> None:
    assert normalize_answer(text) == normalised


def test_squad_em_f1_by_hand() -> None:
    assert squad_exact("the Warsaw.", "Warsaw") == 1
    assert squad_f1("Warsaw Poland city", "Warsaw, Poland") == pytest.approx(
        2 * (2 / 3) / (2 / 3 + 1)
    )
    assert squad_f1("Paris", "Warsaw") == 0.0
    assert squad_f1("", "") == 1.0 and squad_f1("Paris", "") == 0.0
    predictions = {"q1": "Warsaw Poland city", "q2": "in Paris", "q3": "Vienna"}
    references = {"q1": ["Warsaw, Poland", "Warsaw"], "q2": ["Paris"], "q3": ["Salzburg"]}
    result = compute_metrics("qa", predictions, references)
    # q1: EM 0, F1 max(0.8, 2*(1/3)*1/(1/3+1)=0.5); q2: EM 0, F1 2*(1/2)*1/(1/2+1); q3: 0
    assert result["exact_match"] == pytest.approx(0.0)
    assert result["f1"] == pytest.approx(100 * (0.8 + 2 / 3 + 0) / 3)
    assert "HasAns_exact" not in result
    missing = compute_metrics("qa", {"q1": "Warsaw"}, references)
    assert missing["exact_match"] == pytest.approx(100 / 3)  # unanswered questions score 0


def test_squad_v2_no_answer_split() -> None:
    references = {"a": ["Warsaw"], "b": [], "c": [], "d": ["the Nile", "Nile"]}
    predictions = {"a": "warsaw", "b": "", "c": "Paris", "d": "White Nile"}
    result = compute_metrics("qa", predictions, references)
    # a 1/1, b 1/1, c 0/0, d EM 0, F1 max(2*(1/2)*1/(1/2+1), same) = 2/3
    assert result["exact_match"] == pytest.approx(100 * 2 / 4)
    assert result["f1"] == pytest.approx(100 * (1 + 1 + 0 + 2 / 3) / 4)
    assert result["HasAns_exact"] == pytest.approx(50.0)
    assert result["HasAns_f1"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert result["NoAns_exact"] == result["NoAns_f1"] == pytest.approx(50.0)
    assert result["HasAns_total"] == result["NoAns_total"] == 2.0
    # a gold answer that normalises to "" counts as no answer (v2.0)
    assert compute_metrics("qa", {"x": ""}, {"x": ["the"]})["exact_match"] == 100.0


def test_multiple_choice_and_errors() -> None:
    assert compute_metrics("multiple_choice", [0, 2, 3, 1], [0, 2, 1, 1])["accuracy"] == 0.75
    with pytest.raises(ValueError, match=r"unknown task kind 'ner'.*'tagging'"):
        compute_metrics("ner", [], [])
    with pytest.raises(ValueError, match="must be equal"):
        compute_metrics("classification", [0, 1], [0])
