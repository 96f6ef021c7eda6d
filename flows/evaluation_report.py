"""The markdown of ``ptm evaluate``'s report: which model, its scores against the
baseline's, and the counts (how much was scored) kept apart from the scores."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table, metric_direction

# Keys of config.json that say how big an encoder is, in the order they are shown.
_SHAPE_KEYS = (
    ("num_layers", "layers"),
    ("num_hidden_layers", "layers"),
    ("hidden_size", "hidden"),
    ("embedding_dim", "dim"),
    ("vocab_size", "vocab"),
)


def parameter_count(model_dir: str | Path) -> int | None:
    """Parameters in the ``*.safetensors`` files of ``model_dir``, read from their headers
    (no tensor is loaded); ``None`` when there is none or one cannot be read."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        return None
    from safetensors import SafetensorError, safe_open

    total = 0
    try:
        for file in files:
            with safe_open(str(file), framework="numpy") as handle:
                for key in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                    count = 1
                    for size in handle.get_slice(key).get_shape():
                        count *= int(size)
                    total += count
    except (OSError, ValueError, RuntimeError, SafetensorError):
        return None
    return total


def _human(count: int) -> str:
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if count >= scale:
            return f"{count / scale:.3g}{suffix}"
    return str(count)


def model_description(model_dir: str | Path, family: str) -> str:
    """One line naming a model: its folder, family and kind, and size.

    For example ``run1/final (bert, masked_lm; 4.39M parameters; layers 2, hidden 64,
    vocab 1000)``. Whatever cannot be read (no ``config.json``, no safetensors) is left
    out rather than guessed.
    """
    path = Path(model_dir)
    name = "/".join(path.resolve().parts[-2:]) if path.name == "final" else path.name
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    kind = config.get("ptm_model")
    what = [family if not kind or kind == family else f"{family}, {kind}"]
    params = parameter_count(path)
    if params is not None:
        what.append(f"{_human(params)} parameters")
    shape, seen = [], set()
    for key, label in _SHAPE_KEYS:
        value = config.get(key)
        if isinstance(value, int) and label not in seen:
            seen.add(label)
            shape.append(f"{label} {value}")
    if shape:
        what.append(", ".join(shape))
    return f"{name} ({'; '.join(what)})"


def comparison_tables(
    scores: Mapping[str, Any], base: Mapping[str, Any], base_name: str, higher: str
) -> str:
    """Markdown: one row per score (model, baseline, difference), then the counts.

    Scores run down the rows rather than across the columns, so the table stays four
    columns wide however many an evaluation reports (the Prefect artifact panel cuts off
    what does not fit). Counts (``mlm/predictions``, ``tokens``: :func:`metric_direction`
    ``None``) get no difference column: more of them is not better.

    Args:
        scores: the model's scores.
        base: the baseline's scores.
        base_name: the baseline's column title (``random init``, a folder).
        higher: the headline metric, marked with ``*`` in the table.
    """
    numeric = sorted(
        k for k in scores if isinstance(scores[k], (int, float)) and not k.startswith("_")
    )
    # An evaluation's headline metric (a task's f1, a loss) is a score even when its
    # name says nothing (mse, pearson): only names that read as counts are counted.
    counts = [k for k in numeric if metric_direction(k) is None and k != higher and _is_count(k)]
    rows = []
    for name in numeric:
        if name in counts:
            continue
        other = base.get(name)
        rows.append(
            {
                "score": f"{name} *" if name == higher else name,
                "model": scores[name],
                base_name: other if other is not None else "",
                "difference": float(scores[name]) - float(other)
                if isinstance(other, (int, float))
                else "",
            }
        )
    parts = [markdown_table(rows, ["score", "model", base_name, "difference"])]
    if counts:
        count_rows = [
            {"count": name, "model": scores[name], base_name: base.get(name, "")} for name in counts
        ]
        parts.append(
            "Counts and reference rates (how much was scored; not scores):\n\n"
            + markdown_table(count_rows, ["count", "model", base_name])
        )
    return "\n\n".join(parts)


# Leaves that count things rather than score them.
_COUNT_LEAVES = (
    "candidates",
    "corrupted",
    "predictions",
    "mentions",
    "tokens",
    "examples",
    "pairs",
    "triples",
    "documents",
    "total",
    "chance",
)


def _is_count(name: str) -> bool:
    leaf = name.rsplit("/", 1)[-1]
    return any(
        leaf == k or leaf.endswith(f"_{k}") or leaf.startswith(f"{k}_") for k in _COUNT_LEAVES
    )
