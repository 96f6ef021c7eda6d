"""HotpotQA metric definitions: normalisation, answer/supporting-fact/joint scores."""

from __future__ import annotations

import pytest

from ptm_knowledge.cogqa.evaluation import (
    Prediction,
    answer_scores,
    evaluate_predictions,
    normalize_answer,
    supporting_fact_scores,
)
from ptm_knowledge.cogqa.examples import MultiHopExample


def test_normalisation_lowers_and_strips_punctuation_articles_spaces():
    assert normalize_answer("  The  Eiffel-Tower, of a Paris!") == "eiffeltower of paris"
    assert normalize_answer("An apple") == "apple"


def test_answer_scores():
    assert answer_scores("the Danube", "Danube") == (1.0, 1.0, 1.0, 1.0)
    em, f1, p, r = answer_scores("Danube river delta", "Danube Delta")
    assert em == 0.0 and p == pytest.approx(2 / 3) and r == 1.0 and f1 == pytest.approx(0.8)
    assert answer_scores("yes", "yes town")[1] == 0.0  # yes/no must match exactly
    assert answer_scores("", "Paris") == (0.0, 0.0, 0.0, 0.0)


def test_supporting_fact_scores():
    gold = [("A", 0), ("B", 2)]
    assert supporting_fact_scores(gold, gold) == (1.0, 1.0, 1.0, 1.0)
    em, f1, p, r = supporting_fact_scores([("A", 0), ("C", 1)], gold)
    assert (em, p, r) == (0.0, 0.5, 0.5) and f1 == pytest.approx(0.5)
    assert supporting_fact_scores([], gold) == (0.0, 0.0, 0.0, 0.0)


def test_joint_scores_multiply_precision_and_recall():
    ex = MultiHopExample(
        "q", "Who?", "Danube Delta", [("A", ["x"]), ("B", ["y", "z"])], [("A", 0), ("B", 1)]
    )
    pred = Prediction("Danube river delta", (("A", 0), ("B", 0)))
    m = evaluate_predictions([ex], {"q": pred})
    jp, jr = (2 / 3) * 0.5, 1.0 * 0.5
    assert m["joint_prec"] == pytest.approx(jp) and m["joint_recall"] == pytest.approx(jr)
    assert m["joint_f1"] == pytest.approx(2 * jp * jr / (jp + jr))
    assert m["joint_em"] == 0.0
    perfect = evaluate_predictions([ex], {"q": Prediction("danube delta", (("A", 0), ("B", 1)))})
    assert perfect["joint_em"] == perfect["joint_f1"] == 1.0
    assert evaluate_predictions([ex], {})["f1"] == 0.0  # a missing prediction scores 0
