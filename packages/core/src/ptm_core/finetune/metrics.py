"""Downstream metrics, computed by the libraries the benchmarks' own scripts use.

- classification: accuracy, F1 and Matthews correlation from scikit-learn (GLUE reports
  accuracy/F1 for MRPC and QQP, MCC for CoLA);
- regression: Pearson and Spearman correlation from SciPy (STS-B);
- tagging: entity-level precision, recall and F1 from seqeval, in its default mode, which
  scores like CoNLL's ``conlleval`` script: an entity starts at ``B-X``, or at ``I-X``
  after a tag of another type, so IOB1 and BIO predictions are both read (``strict=True``
  uses seqeval's IOB2 strict mode: an entity must begin with ``B-X``);
- qa: SQuAD exact match and F1 exactly as the official v1.1/v2.0 evaluation scripts
  (:func:`normalize_answer`, :func:`squad_exact`, :func:`squad_f1`), in percent;
- multiple_choice: accuracy.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

KINDS = ("classification", "regression", "tagging", "qa", "multiple_choice")
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def compute_metrics(
    kind: str,
    predictions: Any,
    references: Any,
    *,
    num_labels: int | None = None,
    strict: bool = False,
) -> dict[str, float]:
    """Metrics of one task kind.

    Args:
        kind: one of ``classification``, ``regression``, ``tagging``, ``qa``,
            ``multiple_choice``.
        predictions: classification/multiple_choice: predicted class indices ``(N,)``;
            regression: predicted values ``(N,)``; tagging: per sentence, the predicted
            tag names (see :func:`~ptm_core.finetune.data.features.aligned_tags`); qa:
            ``{question id: answer text}`` (``""`` = no answer).
        references: the gold values in the same form; for qa, ``{question id: [gold
            answer texts]}`` with ``[]`` for an unanswerable question (SQuAD v2.0).
        num_labels: classification: number of classes; with 2, ``f1`` is the binary F1
            of class 1 (GLUE's MRPC/QQP convention), otherwise the macro F1. Defaults to
            the number of classes seen.
        strict: tagging: seqeval's strict IOB2 mode instead of the conlleval-like default.

    Returns:
        classification: ``accuracy``, ``f1``, ``f1_macro``, ``matthews_corrcoef``;
        regression: ``pearson``, ``spearman``, ``mse``; tagging: ``precision``, ``recall``,
        ``f1`` (entity level, micro-averaged), ``accuracy`` (per word); qa: ``exact_match``
        and ``f1`` (0-100, over all references; a missing prediction scores 0, as in v1.1),
        plus ``HasAns_*``/``NoAns_*`` and their ``*_total`` when some question has no
        answer; multiple_choice: ``accuracy``.
    """
    if kind == "classification":
        return classification_metrics(predictions, references, num_labels=num_labels)
    if kind == "regression":
        return regression_metrics(predictions, references)
    if kind == "tagging":
        return tagging_metrics(predictions, references, strict=strict)
    if kind == "qa":
        return squad_metrics(predictions, references)
    if kind == "multiple_choice":
        return {"accuracy": _accuracy(predictions, references)}
    raise ValueError(f"unknown task kind {kind!r}; use one of {list(KINDS)}")


def _as_arrays(predictions: Any, references: Any) -> tuple[np.ndarray, np.ndarray]:
    pred = np.asarray(_to_list(predictions))
    gold = np.asarray(_to_list(references))
    if pred.shape != gold.shape or pred.ndim != 1 or not len(pred):
        raise ValueError(
            f"predictions {pred.shape} and references {gold.shape} must be equal, non-empty "
            "1-D sequences"
        )
    return pred, gold


def _to_list(values: Any) -> Any:
    return values.tolist() if hasattr(values, "tolist") else list(values)


def _accuracy(predictions: Any, references: Any) -> float:
    from sklearn.metrics import accuracy_score

    pred, gold = _as_arrays(predictions, references)
    return float(accuracy_score(gold, pred))


def classification_metrics(
    predictions: Any, references: Any, *, num_labels: int | None = None
) -> dict[str, float]:
    """Accuracy, F1 (binary of class 1 for two classes, else macro), macro F1 and
    Matthews correlation (scikit-learn). See :func:`compute_metrics`."""
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    pred, gold = _as_arrays(predictions, references)
    labels = num_labels if num_labels is not None else int(max(pred.max(), gold.max())) + 1
    classes = list(range(labels))
    macro = float(f1_score(gold, pred, labels=classes, average="macro", zero_division=0))
    binary = (
        float(f1_score(gold, pred, pos_label=1, average="binary", zero_division=0))
        if labels == 2
        else macro
    )
    return {
        "accuracy": float(accuracy_score(gold, pred)),
        "f1": binary,
        "f1_macro": macro,
        "matthews_corrcoef": float(matthews_corrcoef(gold, pred)),
    }


def regression_metrics(predictions: Any, references: Any) -> dict[str, float]:
    """Pearson and Spearman correlation (SciPy) and the mean squared error."""
    from scipy.stats import pearsonr, spearmanr

    pred, gold = _as_arrays(predictions, references)
    pred, gold = pred.astype(np.float64), gold.astype(np.float64)
    return {
        "pearson": float(pearsonr(pred, gold)[0]),
        "spearman": float(spearmanr(pred, gold)[0]),
        "mse": float(np.mean((pred - gold) ** 2)),
    }


def tagging_metrics(
    predictions: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    *,
    strict: bool = False,
) -> dict[str, float]:
    """Entity-level micro precision/recall/F1 (seqeval) and per-word accuracy."""
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2

    pred = [list(sentence) for sentence in predictions]
    gold = [list(sentence) for sentence in references]
    if len(pred) != len(gold) or any(len(p) != len(g) for p, g in zip(pred, gold, strict=False)):
        raise ValueError("predictions and references must have the same sentences and lengths")
    options: dict[str, Any] = {"mode": "strict", "scheme": IOB2} if strict else {}
    words = sum(len(g) for g in gold)
    correct = sum(
        p == g for ps, gs in zip(pred, gold, strict=True) for p, g in zip(ps, gs, strict=True)
    )
    return {
        "precision": float(precision_score(gold, pred, zero_division=0, **options)),
        "recall": float(recall_score(gold, pred, zero_division=0, **options)),
        "f1": float(f1_score(gold, pred, zero_division=0, **options)),
        "accuracy": correct / words if words else 0.0,
    }


# ---------------------------------------------------------------- SQuAD (official script)


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lowercase, drop punctuation, drop the articles
    a/an/the, collapse white space (``evaluate-v1.1.py``/``evaluate-v2.0.py``)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def squad_exact(prediction: str, gold: str) -> int:
    """1 when the normalised texts are equal."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def squad_f1(prediction: str, gold: str) -> float:
    """Token-overlap F1 of the normalised texts (bags of words); as v2.0, two empty texts
    score 1 and one empty text 0."""
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(
    predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]
) -> dict[str, float]:
    """SQuAD EM and F1 in percent, maximised over each question's gold answers.

    Gold answers that normalise to ``""`` are dropped and a question without any is scored
    against ``[""]`` (v2.0: only an empty prediction is right). With unanswerable
    questions this is ``evaluate-v2.0.py`` without a threshold, with its
    ``HasAns``/``NoAns`` splits. On v1.1 data it equals ``evaluate-v1.1.py``, except for a
    gold answer that normalises to ``""`` (such as "the"), which v1.1 keeps and v2.0 drops.
    A question without a prediction scores 0 (v1.1; v2.0 leaves it out of the mean).
    """
    if not references:
        raise ValueError("no reference questions to score")
    exact: dict[str, float] = {}
    f1: dict[str, float] = {}
    has_answer: dict[str, bool] = {}
    for qid, answers in references.items():
        golds = [a for a in answers if normalize_answer(a)]
        has_answer[qid] = bool(golds)
        golds = golds or [""]
        prediction = predictions.get(qid)
        if prediction is None:
            exact[qid] = f1[qid] = 0.0
            continue
        exact[qid] = float(max(squad_exact(prediction, g) for g in golds))
        f1[qid] = max(squad_f1(prediction, g) for g in golds)
    result = {
        "exact_match": 100.0 * sum(exact.values()) / len(exact),
        "f1": 100.0 * sum(f1.values()) / len(f1),
        "total": float(len(exact)),
    }
    if not all(has_answer.values()):
        for name, wanted in (("HasAns", True), ("NoAns", False)):
            ids = [qid for qid, has in has_answer.items() if has == wanted]
            if ids:
                result[f"{name}_exact"] = 100.0 * sum(exact[q] for q in ids) / len(ids)
                result[f"{name}_f1"] = 100.0 * sum(f1[q] for q in ids) / len(ids)
            result[f"{name}_total"] = float(len(ids))
    return result


__all__ = [
    "KINDS",
    "classification_metrics",
    "compute_metrics",
    "normalize_answer",
    "regression_metrics",
    "squad_exact",
    "squad_f1",
    "squad_metrics",
    "tagging_metrics",
]
