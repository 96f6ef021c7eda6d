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
