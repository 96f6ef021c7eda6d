"""The layer-probe report: a per-layer table per model and the accuracy curves (``layers.png``)."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table
from ptm_core.atomic import atomic_write_bytes

#: Label counts listed in the report's header.
SHOWN_LABELS = 12


def layer_name(index: int) -> str:
    """``embeddings`` for representation 0, ``layer i`` for the others."""
    return "embeddings" if index == 0 else f"layer {index}"


def _cell(stats: Mapping[str, float], seeds: int) -> str:
    return f"{stats['mean']:.3f}" if seeds == 1 else f"{stats['mean']:.3f} ± {stats['std']:.3f}"


def _source(labels: Mapping[str, Any]) -> str:
    sample = (
        f" (a seeded sample of at most {labels['max_texts']} texts per file, of "
        f"{labels['texts_total']})"
        if "max_texts" in labels
        else ""
    )
    if labels["kind"] == "conll":
        test = f", test sentences from `{labels['test_file']}`" if "test_file" in labels else ""
        return f"column {labels['column']} of `{labels['file']}` (one label per word){test}{sample}"
    return (
        f"types of `{labels['kg']}`'s entities linked in `{labels['text']}` "
        f"({labels['mentions']} mentions in {labels['texts']} texts; "
        f"{labels['untyped_mentions']} mentions of untyped entities left out){sample}"
    )


def layers_markdown(record: Mapping[str, Any]) -> str:
    """The report of :func:`flows.analyze_layers.layers`'s record."""
    first = record["models"][0]
    run = first["runs"][0]
    unseen = run["unseen"]
    seeds = len(record["seeds"])
    counts = sorted(run["labels"].items(), key=lambda item: -item[1])
    shown = ", ".join(f"{name} {n}" for name, n in counts[:SHOWN_LABELS])
    more = f" and {len(counts) - SHOWN_LABELS} more" if len(counts) > SHOWN_LABELS else ""
    settings = record["settings"]
    lines = [
        f"# Layer probes of `{first['model']}`",
        "",
        f"Labels: {_source(record['labels'])}; {first['spans']} spans, {len(counts)} labels "
        f"({shown}{more}). Spans pooled by their {record['pooling']} piece"
        + ("s" if record["pooling"] == "mean" else "")
        + f". Texts split {run['split']['train']}/{run['split']['dev']}/{run['split']['test']} "
        f"spans (train/dev/test, seeded; a text's spans stay together; {unseen:.0%} of the "
        f"test spans are of word types not in train); accuracy is on the "
        f"test split, the probe kept at its best dev step ({settings['steps']} full-batch "
        f"Adam steps, lr {settings['learning_rate']}, weight decay {settings['weight_decay']}). "
        f"The train split's most frequent label scores {run['majority']:.3f}.",
        "",
        "The **control task** (Hewitt & Liang, 2019) gives every word type one random label "
        "drawn from the label distribution; **selectivity** = accuracy - control accuracy. "
        "A probe that only memorises word types scores as well on the control task, so high "
        "selectivity means the layer, not the probe, holds the label.",
        "",
    ]
    if seeds > 1:
        lines += [f"Mean ± sample std over {seeds} seeds ({record['seeds']}).", ""]
    for entry in record["models"]:
        summary = entry["summary"]
        rows = [
            {
                "representation": layer_name(layer["layer"]),
                "accuracy": _cell(layer["accuracy"], seeds),
                "control accuracy": _cell(layer["control_accuracy"], seeds),
                "selectivity": _cell(layer["selectivity"], seeds),
                "mix weight": _cell(summary["mix"]["weights"][layer["layer"]], seeds),
            }
            for layer in summary["layers"]
        ]
        mix = summary["mix"]
        rows.append(
            {
                "representation": "**scalar mix**",
                "accuracy": _cell(mix["accuracy"], seeds),
                "control accuracy": _cell(mix["control_accuracy"], seeds),
                "selectivity": _cell(mix["selectivity"], seeds),
                "mix weight": "1",
            }
        )
        columns = ["representation", "accuracy", "control accuracy", "selectivity", "mix weight"]
        dropped = f" ({entry['dropped']} spans left out)" if entry["dropped"] else ""
        lines += [f"## `{entry['model']}`{dropped}", "", markdown_table(rows, columns), ""]
        best = max(summary["layers"], key=lambda layer: layer["selectivity"]["mean"])
        lines += [
            f"Most selective: {layer_name(best['layer'])} "
            f"(selectivity {best['selectivity']['mean']:.3f}). The scalar mix's weights are "
            "the softmax over representations of its probe on the task.",
            "",
        ]
    lines += ["![Accuracy per layer](layers.png)", ""]
    return "\n".join(lines)


def plot_layers(record: Mapping[str, Any], path: str | Path) -> Path:
    """Task and control accuracy per representation, one colour per model (± std bands)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 3.8), dpi=100)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    for colour, entry in zip(colours, record["models"], strict=False):
        layers = entry["summary"]["layers"]
        x = [layer["layer"] for layer in layers]
        folder = Path(entry["model"].removesuffix(" (random init)"))
        name = f"{folder.parent.name}/{folder.name}" if folder.parent.name else folder.name
        name += " (random init)" if entry["random_init"] else ""
        for key, style, label in (
            ("accuracy", "-o", "task"),
            ("control_accuracy", "--s", "control"),
        ):
            mean = [layer[key]["mean"] for layer in layers]
            std = [layer[key]["std"] for layer in layers]
            axis.plot(x, mean, style, color=colour, label=f"{name}: {label}", markersize=4)
            axis.fill_between(
                x,
                [m - s for m, s in zip(mean, std, strict=True)],
                [m + s for m, s in zip(mean, std, strict=True)],
                color=colour,
                alpha=0.15,
            )
    first = record["models"][0]["summary"]["layers"]
    axis.set_xticks([layer["layer"] for layer in first])
    axis.set_xticklabels(["emb" if layer["layer"] == 0 else str(layer["layer"]) for layer in first])
    axis.set_xlabel("representation (emb = embedding output)")
    axis.set_ylabel("test accuracy")
    axis.set_ylim(0, 1.02)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())
