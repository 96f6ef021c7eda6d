"""Warnings for collapsed fine-tuning runs: a loss stuck at the class prior, one-class output.

A run that collapses (too high a learning rate, an unlucky seed, a frozen or broken encoder)
ends with the loss of a model that ignores its input and predicts the training label
distribution: the entropy of that distribution for classes (``ln 4 = 1.386`` for four
balanced classes) and its variance for a regression. Its dev predictions are often one
class. Neither is an error, and both look like a finished run; :func:`collapse_warnings`
says so in the log and in the run's result (``eval.json``, the printed metrics).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# At most this many training rows are read (evenly spaced) to estimate the label prior.
PRIOR_SAMPLE = 20_000
# The last quarter of the logged steps is the window whose mean loss is compared.
WINDOW_SHARE = 0.25
# |window mean - prior loss| within max(relative * prior, absolute) counts as "at the prior".
RELATIVE_TOLERANCE = 0.02
ABSOLUTE_TOLERANCE = 0.01


@dataclass(frozen=True)
class PriorLoss:
    """The training loss of a model that predicts the label prior and ignores its input.

    Attributes:
        value: the entropy (nats) of the class or tag distribution, or the label variance.
        what: how it was computed, for messages (``"entropy of 4 classes"``, ...).
    """

    value: float
    what: str


def _label_of(row: Any) -> Any:
    row = getattr(row, "example", row)  # ERNIE's linked rows wrap the example
    tags = getattr(row, "tags", None)
    return tags if tags is not None else getattr(row, "label", None)


def prior_loss(rows: Sequence[Any], *, sample: int = PRIOR_SAMPLE) -> PriorLoss | None:
    """The loss of always predicting the training labels' distribution, from ``rows``.

    Rows with an integer ``label`` (classes, multiple choice) or ``tags`` (tagging) give the
    entropy of their distribution; float labels give their variance (the mean-squared error
    of predicting the mean). QA windows and unlabelled rows give ``None``.

    Args:
        rows: the training rows (lazy sequences are read at ``sample`` evenly spaced rows).
        sample: the most rows read.
    """
    total = len(rows)
    if total == 0:
        return None
    stride = max(1, total // sample)
    counts: Counter[int] = Counter()
    values: list[float] = []
    for index in range(0, total, stride):
        label = _label_of(rows[index])
        if isinstance(label, bool) or label is None:
            return None
        if isinstance(label, int):
            counts[label] += 1
        elif isinstance(label, float):
            values.append(label)
        elif isinstance(label, list) and all(isinstance(tag, int) for tag in label):
            counts.update(label)
        else:
            return None
    if values and not counts:
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / len(values)
        return PriorLoss(variance, "variance of the training labels")
    if values or not counts:
        return None
    seen = sum(counts.values())
    entropy = -sum(c / seen * math.log(c / seen) for c in counts.values())
    return PriorLoss(entropy, f"entropy of the training labels' {len(counts)} classes")


def _window_mean(records: Sequence[Mapping[str, Any]]) -> tuple[float, int, int] | None:
    losses = [
        (int(r["step"]), float(r["loss"]))
        for r in records
        if isinstance(r.get("step"), int) and isinstance(r.get("loss"), int | float)
    ]
    if not losses:
        return None
    last = losses[-1][0]
    start = last - max(1, math.ceil(last * WINDOW_SHARE))
    window = [loss for step, loss in losses if step > start] or [losses[-1][1]]
    return sum(window) / len(window), start + 1, last


def _single_class(predictions: Any) -> tuple[Any, int] | None:
    if not isinstance(predictions, list) or len(predictions) < 2:
        return None
    if all(isinstance(p, int) and not isinstance(p, bool) for p in predictions) or all(
        isinstance(p, str)
        for p in predictions  # label names or answers
    ):
        flat: list[Any] = predictions
    elif all(isinstance(p, list) for p in predictions):  # tag names per sentence
        flat = [tag for sentence in predictions for tag in sentence]
    else:
        return None  # regression values, QA answers
    distinct = set(flat)
    return (next(iter(distinct)), len(flat)) if len(flat) >= 2 and len(distinct) == 1 else None


def collapse_warnings(
    records: Sequence[Mapping[str, Any]],
    prior: PriorLoss | None,
    predictions: Any = None,
    *,
    label_names: Sequence[str] | None = None,
) -> list[str]:
    """One line per sign of a collapsed run (empty when there is none).

    Args:
        records: the run's metrics lines (``metrics.jsonl``: ``step`` and ``loss``).
        prior: the label prior's loss (:func:`prior_loss`), or ``None`` to skip that check.
        predictions: the dev predictions: class indices (classification, multiple choice)
            or tag names per sentence (tagging); other shapes are not checked.
        label_names: class names, to name the one predicted class.

    Returns:
        Messages that say what was seen and what to try.
    """
    warnings = []
    window = _window_mean(records)
    if prior is not None and window is not None:
        mean, first, last = window
        tolerance = max(RELATIVE_TOLERANCE * prior.value, ABSOLUTE_TOLERANCE)
        if abs(mean - prior.value) <= tolerance:
            warnings.append(
                f"collapsed run: the training loss over steps {first}-{last} averages "
                f"{mean:.4f}, the loss of predicting the label prior without reading the input "
                f"({prior.value:.4f}, {prior.what}); the model learned nothing from the text. "
                "Try a lower learning rate or another seed, and check that the encoder trains "
                "and that the labels follow from the text"
            )
    single = _single_class(predictions)
    if single is not None:
        value, count = single
        name = (
            f"{label_names[value]!r} (class {value})"
            if label_names is not None and isinstance(value, int) and 0 <= value < len(label_names)
            else repr(value)
        )
        warnings.append(
            f"collapsed run: all {count} dev predictions are {name}; the model predicts one "
            "class whatever the input. Try a lower learning rate or another seed"
        )
    return warnings


__all__ = ["PriorLoss", "collapse_warnings", "prior_loss"]
