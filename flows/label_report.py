"""A fine-tuning run's label report: the confusion matrix and per-label precision,
recall and F1 of its dev set, as a PNG in the run folder and a Prefect artifact.

The scores come from the run's ``dev_labels.json``
(:func:`ptm_core.finetune.label_scores.label_scores`). A large label set stays readable:
the matrix shows the :data:`TOP_K` labels involved in the most errors (the others are
folded into one "other" row and column), and the figure grows with the labels shown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flows.artifacts import embedded_image, markdown_table, publish_markdown, save_figure
from ptm_core.finetune.label_scores import LABELS_FILE

PNG_NAME = "label_report.png"
#: Most labels drawn in the matrix and listed in the artifact's table.
TOP_K = 20
OTHER = "(other)"


def read_label_scores(run_dir: str | Path) -> dict[str, Any] | None:
    """The run's ``dev_labels.json``, or ``None`` when it has none (regression, QA, an
    older run)."""
    path = Path(run_dir) / LABELS_FILE
    if not path.is_file():
        return None
    try:
        scores = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc}); re-run the fine-tuning") from None
    return scores if isinstance(scores, dict) else None


def shown_labels(labels: Sequence[str], confusion: Sequence[Sequence[int]], k: int) -> list[int]:
    """Indices of the labels the matrix shows: all of them up to ``k``, else the ``k``
    involved in the most errors (gold or predicted), then the most frequent; in their
    original order."""
    if len(labels) <= k:
        return list(range(len(labels)))
    size = len(labels)
    errors = [
        sum(confusion[i][j] + confusion[j][i] for j in range(size) if j != i) for i in range(size)
    ]
    support = [sum(row) for row in confusion]
    ranked = sorted(range(size), key=lambda i: (-errors[i], -support[i], i))
    return sorted(ranked[:k])


def folded_matrix(
    confusion: Sequence[Sequence[int]], keep: Sequence[int]
) -> tuple[list[list[int]], bool]:
    """The confusion matrix restricted to ``keep``, with every other label folded into a
    last "other" row and column (only when there are others). Returns ``(matrix, folded)``."""
    size = len(confusion)
    folded = len(keep) < size
    position = {label: n for n, label in enumerate(keep)}
    width = len(keep) + (1 if folded else 0)
    matrix = [[0] * width for _ in range(width)]
    for i in range(size):
        for j in range(size):
            row = position.get(i, width - 1)
            column = position.get(j, width - 1)
            matrix[row][column] += confusion[i][j]
    return matrix, folded


def plot_label_report(scores: Mapping[str, Any], path: str | Path, k: int = TOP_K) -> Path:
    """Draw the confusion matrix (rows: gold, columns: predicted, shaded by each gold
    row's share, annotated with counts) above a per-label F1/precision/recall chart.

    The figure's size follows the number of labels shown (at most ``k`` + "other").
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(scores["labels"])
    keep = shown_labels(labels, scores["confusion"], k)
    matrix, folded = folded_matrix(scores["confusion"], keep)
    names = [labels[i] for i in keep] + ([OTHER] if folded else [])
    per_label = [r for r in scores["per_label"]]
    n, m = len(names), len(per_label[:k])
    # Inches: the matrix grows with its labels, the bar chart below it with its rows. One
    # column (matrix above chart) keeps the figure narrow: the Prefect panel scales it to
    # its width, and a side-by-side figure would shrink the labels to illegibility.
    side = max(4.0, 0.3 * n + 1.8)
    chart = 0.3 * m + 1.2
    figure, (left, right) = plt.subplots(
        2,
        1,
        figsize=(max(side, 6.0), side + chart),
        dpi=100,
        gridspec_kw={"height_ratios": [side, chart]},
    )
    shares = [[c / max(1, sum(row)) for c in row] for row in matrix]
    left.imshow(shares, cmap="Blues", vmin=0.0, vmax=1.0)
    left.set_xticks(range(n), names, rotation=90, fontsize=8)
    left.set_yticks(range(n), names, fontsize=8)
    left.set_xlabel("predicted")
    left.set_ylabel("gold")
    title = f"confusion ({scores.get('unit', 'examples')})"
    if folded:
        title += f": {len(keep)} of {len(labels)} labels, most errors"
    left.set_title(title, fontsize=9)
    if n <= 30:
        for i in range(n):
            for j in range(n):
                if matrix[i][j]:
                    color = "white" if shares[i][j] > 0.6 else "black"
                    left.text(j, i, matrix[i][j], ha="center", va="center", fontsize=7, color=color)
    _per_label_chart(right, worst_first(per_label)[:k], scores.get("per_label_unit", "examples"))
    figure.tight_layout()
    return save_figure(figure, path)


def _per_label_chart(axis: Any, rows: Sequence[Mapping[str, Any]], unit: str) -> None:
    labels = [str(r["label"]) for r in rows]
    y = list(range(len(rows)))
    height = 0.27
    for offset, key, color in ((-height, "precision", "#9ecae1"), (0.0, "recall", "#6baed6")):
        axis.barh(
            [v + offset for v in y],
            [r[key] or 0.0 for r in rows],
            height=height,
            color=color,
            label=key,
        )
    axis.barh(
        [v + height for v in y],
        [r["f1"] or 0.0 for r in rows],
        height=height,
        color="#08519c",
        label="F1",
    )
    axis.set_yticks(y, [f"{name} ({r['support']})" for name, r in zip(labels, rows, strict=True)])
    axis.tick_params(axis="y", labelsize=8)
    axis.invert_yaxis()
    axis.set_xlim(0, 1)
    axis.set_title(f"per label, worst F1 first (support in {unit})", fontsize=9)
    axis.legend(fontsize=7, loc="lower right")


def worst_first(per_label: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Per-label rows by F1, lowest first; labels with no dev example (no F1) last."""
    return sorted(per_label, key=lambda r: (r["f1"] is None, r["f1"] or 0.0, str(r["label"])))


def label_report_markdown(scores: Mapping[str, Any], png: str | Path, k: int = TOP_K) -> str:
    """The artifact: the figure (embedded, scaled to the panel) and a four-column table of
    the ``k`` labels with the lowest F1, with a note of how many more there are."""
    rows = worst_first(scores["per_label"])
    unit = scores.get("per_label_unit", "examples")
    table = [
        {
            "label": r["label"],
            "P": _score(r["precision"]),
            "R": _score(r["recall"]),
            "F1": _score(r["f1"]),
            "n": r["support"],
        }
        for r in rows[:k]
    ]
    more = len(rows) - len(table)
    note = (
        f"\n\nThe {len(table)} labels with the lowest F1 of {len(rows)}; every label is in "
        f"`{LABELS_FILE}`."
        if more > 0
        else ""
    )
    absent = [str(r["label"]) for r in rows if not r["support"]]
    missing = (
        f"\n\nNo dev example of: {', '.join(absent[:10])}"
        + (f" and {len(absent) - 10} more" if len(absent) > 10 else "")
        + " (recall and F1: -)."
        if absent
        else ""
    )
    return (
        f"## Labels on {scores.get('dev_set', 'the dev set')}\n\n"
        + embedded_image(png, "confusion matrix and per-label scores")
        + f"\n\nP = precision, R = recall, n = gold {unit} in dev.\n\n"
        + markdown_table(table, ["label", "P", "R", "F1", "n"])
        + note
        + missing
        + "\n"
    )


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def write_label_report(run_dir: str | Path) -> Path | None:
    """Draw ``label_report.png`` in ``run_dir`` from its ``dev_labels.json`` and, inside a
    flow, publish the ``finetune-labels`` artifact; ``None`` when the run has no labels."""
    scores = read_label_scores(run_dir)
    if scores is None:
        return None
    png = plot_label_report(scores, Path(run_dir) / PNG_NAME)
    publish_markdown(
        "finetune-labels",
        label_report_markdown(scores, png),
        f"confusion matrix and per-label scores of {run_dir}",
    )
    return png
