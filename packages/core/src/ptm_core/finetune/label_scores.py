"""Per-label scores and the confusion matrix of a classification or tagging dev set.

:func:`~ptm_core.finetune.scoring.evaluate_task` returns its dev predictions as
:class:`LabelledPredictions` (still a list of predictions) so that
:func:`~ptm_core.finetune.scoring.train_and_score` can write :data:`LABELS_FILE` beside
``eval.json``: which labels the model confuses, and each label's precision, recall and F1.
The report's figure is drawn from that file (``flows/label_report.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LABELS_FILE = "dev_labels.json"
#: The column of predictions that are no label (a text-to-text generation of another text).
NO_LABEL = "(not a label)"


class LabelledPredictions(list[Any]):
    """Dev predictions (a list, as :func:`evaluate_task` always returned) that also carry
    the gold labels they were scored against.

    Attributes:
        references: the gold values, in the predictions' form (class indices or label
            names, or tag names per sentence).
        label_names: class or tag names by index.
        kind: ``"classification"`` or ``"tagging"``.
    """

    def __init__(
        self,
        predicted: Sequence[Any],
        references: Sequence[Any],
        label_names: Sequence[str],
        kind: str,
    ) -> None:
        super().__init__(predicted)
        self.references = list(references)
        self.label_names = list(label_names)
        self.kind = kind


def label_scores(predictions: LabelledPredictions) -> dict[str, Any]:
    """The confusion matrix and per-label scores of ``predictions``, as JSON-ready data.

    Classification counts examples (predictions and references are class indices or label
    names; a prediction of ``-1`` or of another name, such as a text-to-text generation
    that is no label, goes to an extra :data:`NO_LABEL` column); tagging counts words
    (each word's gold tag against its predicted tag) in the matrix and, as seqeval does,
    entities in the per-label scores (one row per entity type, ``PER`` for ``B-PER``/``I-PER``).

    Returns:
        ``{"kind", "labels", "confusion", "unit", "per_label", "per_label_unit"}``:
        ``confusion[i][j]`` counts gold ``labels[i]`` predicted as ``labels[j]``;
        ``per_label`` is a list of ``{"label", "precision", "recall", "f1", "support"}``
        where ``recall`` and ``f1`` are ``None`` for a label with no gold example in dev
        (it cannot be recalled), and ``precision`` is ``None`` when it was never
        predicted.
    """
    if predictions.kind == "tagging":
        return _tagging_scores(predictions)
    labels = list(predictions.label_names)
    gold = [_class_index(g, labels) for g in predictions.references]
    pred = [_class_index(p, labels) for p in predictions]
    if any(p < 0 for p in pred):  # a generated text that is no label (text-to-text)
        pred = [p if p >= 0 else len(labels) for p in pred]
        labels.append(NO_LABEL)
    confusion = _confusion(gold, pred, len(labels))
    # The no-label column has no row of its own: no example has it as gold.
    per_label = [_row(labels[i], confusion, i) for i in range(len(predictions.label_names))]
    return {
        "kind": "classification",
        "labels": labels,
        "confusion": confusion,
        "unit": "examples",
        "per_label": per_label,
        "per_label_unit": "examples",
    }


def _class_index(value: Any, labels: Sequence[str]) -> int:
    """A class index, or a label name's index; ``-1`` (and an unknown name) is no label."""
    if isinstance(value, str):
        return labels.index(value) if value in labels else -1
    return int(value)


def _confusion(gold: Sequence[int], pred: Sequence[int], size: int) -> list[list[int]]:
    matrix = [[0] * size for _ in range(size)]
    for g, p in zip(gold, pred, strict=True):
        matrix[g][p] += 1
    return matrix


def _row(label: str, confusion: Sequence[Sequence[int]], i: int) -> dict[str, Any]:
    true = confusion[i][i]
    support = sum(confusion[i])
    predicted = sum(row[i] for row in confusion)
    return _scores(label, true, predicted, support)


def _scores(label: str, true: int, predicted: int, support: int) -> dict[str, Any]:
    precision = true / predicted if predicted else None
    recall = true / support if support else None
    f1 = None
    if recall is not None:
        p = precision or 0.0
        f1 = 2 * p * recall / (p + recall) if p + recall else 0.0
    return {
        "label": label,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": support,
    }


def _tagging_scores(predictions: LabelledPredictions) -> dict[str, Any]:
    from seqeval.metrics.sequence_labeling import get_entities

    tags = list(predictions.label_names)
    index = {tag: i for i, tag in enumerate(tags)}
    gold_words = [tag for sentence in predictions.references for tag in sentence]
    pred_words = [tag for sentence in predictions for tag in sentence]
    confusion = _confusion(
        [index[t] for t in gold_words], [index[t] for t in pred_words], len(tags)
    )
    # Entities as seqeval counts them: (type, start, end) over the concatenated sentences,
    # each sentence closed by an "O" so that no entity runs across two.
    gold = {e for e in get_entities(_joined(predictions.references))}
    pred = {e for e in get_entities(_joined(predictions))}
    types = sorted({t.split("-", 1)[-1] for t in tags if t != "O"})
    per_label = [
        _scores(
            name,
            sum(1 for e in gold & pred if e[0] == name),
            sum(1 for e in pred if e[0] == name),
            sum(1 for e in gold if e[0] == name),
        )
        for name in types
    ]
    return {
        "kind": "tagging",
        "labels": tags,
        "confusion": confusion,
        "unit": "words",
        "per_label": per_label,
        "per_label_unit": "entities",
    }


def _joined(sentences: Sequence[Sequence[str]]) -> list[str]:
    return [tag for sentence in sentences for tag in [*sentence, "O"]]
