"""HotpotQA metrics: answer EM/F1, supporting-fact EM/F1 and joint EM/F1.

Definitions follow the official ``hotpot_evaluate_v1.py`` (Yang et al., 2018): answers are
normalised (lower case, punctuation and the articles a/an/the removed, whitespace
collapsed); answer F1 is token-overlap F1 (``yes``/``no``/``noanswer`` must match exactly);
supporting-fact precision/recall are over ``(title, sentence index)`` sets; joint precision
and recall are the products of the answer and supporting-fact ones, and joint EM needs
both EMs.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ptm_knowledge.cogqa.examples import MultiHopExample

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower, remove punctuation, remove articles, collapse whitespace (HotpotQA order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def answer_scores(prediction: str, gold: str) -> tuple[float, float, float, float]:
    """``(em, f1, precision, recall)`` of one answer, HotpotQA definition."""
    pred_n, gold_n = normalize_answer(prediction), normalize_answer(gold)
    em = float(pred_n == gold_n)
    special = ("yes", "no", "noanswer")
    if (pred_n in special or gold_n in special) and pred_n != gold_n:
        return em, 0.0, 0.0, 0.0
    common = Counter(pred_n.split()) & Counter(gold_n.split())
    same = sum(common.values())
    if same == 0:
        return em, 0.0, 0.0, 0.0
    precision = same / len(pred_n.split())
    recall = same / len(gold_n.split())
    return em, 2 * precision * recall / (precision + recall), precision, recall


def supporting_fact_scores(
    prediction: Iterable[tuple[str, int]], gold: Iterable[tuple[str, int]]
) -> tuple[float, float, float, float]:
    """``(em, f1, precision, recall)`` over ``(title, sentence index)`` sets."""
    pred_set = {(t, int(i)) for t, i in prediction}
    gold_set = {(t, int(i)) for t, i in gold}
    tp = len(pred_set & gold_set)
    fp = len(pred_set - gold_set)
    fn = len(gold_set - pred_set)
    precision = tp / (tp + fp) if tp + fp > 0 else 0.0
    recall = tp / (tp + fn) if tp + fn > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    em = 1.0 if fp + fn == 0 else 0.0
    return em, f1, precision, recall


@dataclass(frozen=True)
class Prediction:
    """A system's output for one example: answer text and supporting facts."""

    answer: str
    supporting_facts: tuple[tuple[str, int], ...] = ()


def evaluate_predictions(
    examples: Sequence[MultiHopExample], predictions: Mapping[str, Prediction]
) -> dict[str, float]:
    """Average HotpotQA metrics over ``examples`` (a missing prediction scores 0).

    Returns:
        ``em, f1, prec, recall, sp_em, sp_f1, sp_prec, sp_recall, joint_em, joint_f1,
        joint_prec, joint_recall`` (as in the official script), each in ``[0, 1]``.

    Raises:
        ValueError: ``examples`` is empty (the scores would be a meaningless 0).
    """
    if not examples:
        raise ValueError(
            "evaluate_predictions: no examples to score; the dev set is empty (check the dev "
            "file, or num_train against the number of generated questions)"
        )
    keys = (
        "em",
        "f1",
        "prec",
        "recall",
        "sp_em",
        "sp_f1",
        "sp_prec",
        "sp_recall",
        "joint_em",
        "joint_f1",
        "joint_prec",
        "joint_recall",
    )
    totals = dict.fromkeys(keys, 0.0)
    for example in examples:
        pred = predictions.get(example.id, Prediction(""))
        em, f1, p, r = answer_scores(pred.answer, example.answer)
        sem, sf1, sp, sr = supporting_fact_scores(pred.supporting_facts, example.supporting_facts)
        jp, jr = p * sp, r * sr
        jf1 = 2 * jp * jr / (jp + jr) if jp + jr > 0 else 0.0
        for key, value in zip(
            keys, (em, f1, p, r, sem, sf1, sp, sr, em * sem, jf1, jp, jr), strict=True
        ):
            totals[key] += value
    n = len(examples)
    return {key: value / n for key, value in totals.items()}
