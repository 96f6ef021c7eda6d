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


def publish_markdown(key: str, markdown: str, description: str) -> None:
    """Create a Prefect markdown artifact when running inside a flow; no-op otherwise."""
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is not None:
        create_markdown_artifact(markdown=markdown, key=key, description=description)


def write_report(path: str | Path, markdown: str) -> Path:
    """Write a markdown report atomically."""
    return atomic_write_text(path, markdown)
