"""Reports and Prefect artifacts: metrics tables, loss curves, markdown reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_bytes, atomic_write_text
from ptm_core.training.metrics import MetricsLog


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` file (empty when it does not exist)."""
    return MetricsLog(Path(path)).read()


def plot_loss_curve(records: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write a PNG of every ``*loss`` series against the step (matplotlib, no display)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=100)
    steps = [r["step"] for r in records]
    keys = sorted({k for r in records for k in r if k == "loss" or k.endswith("/loss")})
    for key in keys:
        axis.plot(steps, [r.get(key, float("nan")) for r in records], label=key)
    axis.set_xlabel("step")
    axis.set_ylabel("loss")
    axis.grid(alpha=0.3)
    if keys:
        axis.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub-flavoured markdown table; floats get 4 significant digits."""

    def cell(value: Any) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def png_data_uri(path: str | Path) -> str:
    """A PNG file as a ``data:image/png;base64,...`` URI (embeds it in markdown or HTML)."""
    import base64

    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def embedded_image(path: str | Path, alt: str) -> str:
    """Markdown that shows the PNG at ``path`` inline (a data URI: no file server needed).

    The Prefect UI renders it in a markdown artifact, and so does any markdown viewer that
    allows data URIs; the image stays readable where the file system is not shared.
    """
    return f"![{alt}]({png_data_uri(path)})"


def publish_image(key: str, png: str | Path, description: str) -> None:
    """Create a Prefect image artifact of a PNG (as a data URI) inside a flow; else no-op."""
    from prefect.artifacts import create_image_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is not None:
        create_image_artifact(image_url=png_data_uri(png), key=key, description=description)


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """Create a Prefect markdown artifact when running inside a flow; no-op otherwise."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is not None:
        create_markdown_artifact(markdown=markdown, key=key, description=description)


def write_report(path: str | Path, markdown: str) -> Path:
    """Write a markdown report atomically."""
    return atomic_write_text(path, markdown)


# Gaps that count as overfitting: an accuracy-like score this much higher on training data
# (absolute), or a loss this many times the training loss (and 0.1 above it).
ACCURACY_GAP = 0.1
LOSS_RATIO = 1.5
# Held-out data kept less than this share of what training gained over the baseline (random
# init): the gain was memorised, not learned.
KEPT_SHARE = 0.25
_HIGHER_IS_BETTER = ("accuracy", "f1", "mrr", "em", "exact_match")
_LOWER_IS_BETTER = ("loss", "perplexity")


def metric_direction(name: str) -> str | None:
    """``"higher"`` / ``"lower"`` for scores and losses, ``None`` for counts and rates
    that are not a quality (``mlm/predictions``, ``dea/chance``)."""
    leaf = name.rsplit("/", 1)[-1]
    if leaf.startswith("hits") or any(
        leaf == k or leaf.endswith(f"_{k}") for k in _HIGHER_IS_BETTER
    ):
        return "higher"
    if any(leaf == k or leaf.endswith(f"_{k}") for k in _LOWER_IS_BETTER):
        return "lower"
    return None


# How objectives are written in prose (the papers' spelling).
_OBJECTIVE_NAMES = {"dea": "dEA", "mlm": "MLM", "nsp": "NSP", "sop": "SOP", "tlm": "TLM"}


def _label(name: str) -> str:
    """``nsp/accuracy`` -> ``NSP``, ``dea/loss`` -> ``dEA loss``, ``loss`` -> ``total loss``."""
    if "/" not in name:
        return "total loss" if name == "loss" else name
    group, leaf = name.rsplit("/", 1)
    group = _OBJECTIVE_NAMES.get(group, group)
    return group if leaf == "accuracy" else f"{group} {leaf}"


def generalisation_flags(
    train: Mapping[str, Any],
    held_out: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
) -> list[str]:
    """One plain sentence per metric whose held-out value falls well short of training.

    Args:
        train: metrics on the training data (an evaluation pass on the training split).
        held_out: the same metrics on held-out data.
        baseline: the same metrics of a random-init model on the held-out data. A score
            is "memorised, not learned" when the held-out data keep less than a quarter
            of its gain over this baseline (NSP 0.98 on training, 0.57 held-out, 0.50 at
            random init), a loss when it is held-out worse than the baseline's; other
            large gaps are "overfitting".

    Returns:
        Sentences such as ``"NSP: 0.98 on training, 0.57 held-out: memorised, not
        learned."``, in the order of the metric names.
    """
    flags = []
    for name in sorted(set(train) & set(held_out)):
        direction = metric_direction(name)
        a, b = train[name], held_out[name]
        if direction is None or not all(isinstance(v, (int, float)) for v in (a, b)):
            continue
        found = (baseline or {}).get(name)
        base = float(found) if isinstance(found, (int, float)) else None
        suffix = f" (random init: {base:.2f})" if base is not None else ""
        if direction == "higher":
            if a - b < ACCURACY_GAP:
                continue
            chance = base is not None and b - base <= KEPT_SHARE * (a - base)
            verdict = "memorised, not learned" if chance else "overfitting, partly learned"
        else:
            if b < a * LOSS_RATIO or b - a < 0.1:
                continue
            chance = base is not None and b >= base
            verdict = "memorised, not learned" if chance else "overfitting"
        flags.append(f"{_label(name)}: {a:.2f} on training, {b:.2f} held-out{suffix}: {verdict}.")
    return flags


def generalisation_report(
    train: Mapping[str, Any],
    held_out: Mapping[str, Any],
    *,
    logged: Mapping[str, Any] | None = None,
    baseline: Mapping[str, Any] | None = None,
    baseline_name: str = "random init",
) -> str:
    """Markdown: every metric on training data against held-out data, side by side, and
    a sentence for each gap large enough to call overfitting (see
    :func:`generalisation_flags`).

    Args:
        train: an evaluation pass on the training split.
        held_out: the same evaluation on the held-out split.
        logged: the last metrics line of training (train mode: dropout, training masks),
            shown beside the evaluation pass when given.
        baseline: the held-out metrics of the baseline model.
        baseline_name: the baseline's column title.

    Returns:
        A markdown section body (table, then the verdict sentences).
    """
    names = sorted(k for k in set(train) & set(held_out) if isinstance(train[k], (int, float)))
    columns = ["metric"]
    if logged is not None:
        columns.append("training (last log)")
    gap = "gap (held-out - training)"
    columns += ["training split", "held-out", f"held-out, {baseline_name}", gap]
    rows = []
    for name in names:
        row: dict[str, Any] = {"metric": name}
        if logged is not None:
            row["training (last log)"] = logged.get(name, "")
        row["training split"] = float(train[name])
        row["held-out"] = float(held_out[name])
        row[f"held-out, {baseline_name}"] = (baseline or {}).get(name, "")
        row[gap] = float(held_out[name]) - float(train[name])
        rows.append(row)
    flags = generalisation_flags(train, held_out, baseline)
    if flags:
        verdict = "**Overfitting** (held-out well short of training):\n\n" + "\n".join(
            f"- {flag}" for flag in flags
        )
    else:
        verdict = (
            f"No gap between training and held-out data above {ACCURACY_GAP} in a score or "
            f"{LOSS_RATIO}x in a loss."
        )
    return markdown_table(rows, columns) + "\n\n" + verdict + "\n"
