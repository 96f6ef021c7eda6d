"""The small table every long ``ptm`` command prints when it ends: key metrics, outputs.

Plain aligned text, no box characters or colours, so it reads the same on a terminal, in
a CI log and in Prefect's run log (where the leading blank line keeps the title off
Prefect's ``time | INFO | Flow run ...`` prefix)::

    finetune kg_pair
      metric         value
      dev/accuracy   0.8235
      loss           0.4120
      output         where
      final model    runs/finetune-kg_pair/seed0/final
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

# Training figures that say how fast, not how good: left out of the end table (the step
# lines and metrics.jsonl keep them).
SPEED_KEYS = frozenset({"step", "tokens_per_s", "data_wait_share", "epoch", "grad_norm", "lr"})


def format_value(value: Any) -> str:
    """Numbers to 4 significant figures (integers whole), everything else as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4f}" if value == 0 or 1e-3 <= abs(value) < 1e4 else f"{value:.4g}"


def key_metrics(metrics: Mapping[str, Any], skip: Iterable[str] = SPEED_KEYS) -> dict[str, Any]:
    """The metrics worth a row: numbers (and text), without speed figures and lists."""
    skipped = set(skip)
    return {
        key: value
        for key, value in sorted(metrics.items())
        if key not in skipped and not isinstance(value, (list, dict))
    }


def end_table(
    title: str,
    metrics: Mapping[str, Any],
    outputs: Mapping[str, str | Path | None],
) -> str:
    """The table's text: a title line, the metric rows, then the output rows.

    Args:
        title: what ran (``"finetune kg_pair"``).
        metrics: name -> value, in the order to show (see :func:`key_metrics`).
        outputs: label -> path; ``None`` paths are left out.

    Returns:
        Lines indented under the title, columns aligned, no trailing newline.
    """
    rows: list[tuple[str, str]] = []
    if metrics:
        rows.append(("metric", "value"))
        rows += [(str(k), format_value(v)) for k, v in metrics.items()]
    shown = {label: path for label, path in outputs.items() if path is not None}
    if shown:
        rows.append(("output", "where"))
        rows += [(label, str(path)) for label, path in shown.items()]
    width = max((len(name) for name, _ in rows), default=0)
    return "\n".join([title, *(f"  {name:<{width}}  {value}" for name, value in rows)])


def print_end_table(
    title: str,
    metrics: Mapping[str, Any],
    outputs: Mapping[str, str | Path | None],
) -> None:
    """Print :func:`end_table` after a blank line (on stdout; in a flow, to its log)."""
    print("\n" + end_table(title, metrics, outputs), flush=True)


def print_pretrain_table(experiment: str, result: Any) -> None:
    """``ptm pretrain``'s end table: examples and last metrics; encoder, checkpoint, metrics.

    Args:
        experiment: the preset's ``experiment_name``.
        result: what the family's runner returned (``final_metrics``, ``encoder_dir``,
            ``last_checkpoint``, ``metrics_path``; ``num_examples`` when it has them).
    """
    examples = {"examples": result.num_examples} if hasattr(result, "num_examples") else {}
    print_end_table(
        f"pretrain {experiment}",
        {**examples, **key_metrics(result.final_metrics)},
        {
            "final encoder": result.encoder_dir,
            "checkpoint": result.last_checkpoint,
            "metrics": result.metrics_path,
        },
    )


def print_finetune_table(run: Mapping[str, Any]) -> None:
    """``ptm finetune``'s end table: ``dev/`` metrics first; final model, eval.json, metrics.

    Args:
        run: one run as :func:`flows.finetune.run_one` returns it.
    """
    metrics = key_metrics(run["final_metrics"])
    dev_first = sorted(metrics, key=lambda name: not name.startswith("dev/"))
    print_end_table(
        f"finetune {run['task']}",
        {name: metrics[name] for name in dev_first},
        {
            "final model": run["final_dir"],
            "dev metrics": Path(run["output_dir"]) / "eval.json",
            "metrics": run["metrics_path"],
        },
    )
