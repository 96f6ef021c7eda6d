"""The LAMA report: a markdown table per relation and a bar chart (``ptm analyze``)."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table
from ptm_core.atomic import atomic_write_bytes

#: Statements shown per relation under the table.
EXAMPLES = 2


def _name(folder: str) -> str:
    path = Path(folder)
    return f"{path.parent.name}/{path.name}" if path.parent.name else path.name


def tree_sentence(model: str, counts: Mapping[str, Any]) -> str:
    """What K-BERT's sentence trees injected into the statements of one run."""
    if counts["kg"] == "none":
        return (
            f"`{model}` read every statement as a K-BERT sentence tree without branches "
            "(injection off: the same inputs as the plain masked LM)."
        )
    return (
        f"`{model}` read every statement as a K-BERT sentence tree with branches from "
        f"`{counts['kg']}` (at most {counts['max_entities']} per subject): "
        f"{counts['with_branches']} of {counts['statements']} statements got branches "
        f"({counts['branches']} in all). The probed triple is never injected: "
        f"{counts['own_triple_removed']} statements had their own triple removed from their "
        f"tree ({counts['own_triple_in_kg']} have it in that KG); in "
        f"{counts['answer_in_branches']} the answer token still sits in a branch of another "
        "fact (the knowledge K-BERT is meant to use)."
    )


def lama_markdown(
    results: Sequence[Any],
    summaries: Sequence[Mapping[str, Any]],
    comparison: Mapping[str, Any] | None,
    *,
    kg: str,
) -> str:
    """The report of one model, or of two side by side (``comparison`` given)."""
    first = summaries[0]
    lines = [f"# LAMA probe of `{results[0].model}`", ""]
    total = first["overall"]["n"]
    dropped = sum(n for reasons in first["dropped"].values() for n in reasons.values())
    lines.append(
        f"{total} cloze statements from `{kg}` ({len(first['relations'])} relations); "
        f"{dropped} facts dropped because their object is not one token of the model's "
        "vocabulary. Ranks are filtered (the subject's other objects and special tokens "
        "are not ranked); overall = mean over relations, as LAMA reports it."
    )
    lines.append("")
    for result, summary in zip(results, summaries, strict=True):
        if "sentence_trees" in summary:
            lines += [tree_sentence(result.model, summary["sentence_trees"]), ""]
    rows = []
    for relation, metrics in first["relations"].items():
        rows.append(
            {
                "relation": relation,
                "template": first["templates"][relation].replace("|", "\\|")
                + (" (derived)" if relation in first["derived_templates"] else ""),
                "n": metrics["n"],
                "P@1": metrics["p@1"],
                "P@10": metrics["p@10"],
                "MRR": metrics["mrr"],
            }
        )
    for label, key in (("**overall**", "overall"), ("micro (per statement)", "micro")):
        m = first[key]
        rows.append(
            {"relation": label, "n": m["n"], "P@1": m["p@1"], "P@10": m["p@10"], "MRR": m["mrr"]}
        )
    for label in ("seen", "unseen"):
        if label in first:
            m = first[label]
            rows.append(
                {
                    "relation": f"facts {label} in training",
                    "n": m["n"],
                    "P@1": m["p@1"],
                    "P@10": m["p@10"],
                    "MRR": m["mrr"],
                }
            )
    lines += [
        markdown_table(rows, ["relation", "template", "n", "P@1", "P@10", "MRR"], digits=3),
        "",
    ]
    if comparison is not None:
        a, b = _name(comparison["first"]), _name(comparison["second"])
        overall = comparison["overall"]
        low, high = overall["p@1_difference_ci95"]
        lines += [
            f"## `{a}` against `{b}`",
            "",
            f"On the {overall['n']} facts both models could be asked "
            f"({comparison['only_first']} only by the first, {comparison['only_second']} only "
            f"by the second): P@1 {overall['first']['p@1']:.3f} against "
            f"{overall['second']['p@1']:.3f}, a difference of {overall['p@1_difference']:+.3f} "
            f"(95% paired bootstrap interval {low:+.3f} to {high:+.3f}; McNemar exact "
            f"p = {overall['mcnemar_p']:.3g}, {overall['only_second_right']} facts right only "
            f"in the second, {overall['only_first_right']} only in the first).",
            "",
        ]
        compare_rows = [
            {
                "relation": relation,
                "n": row["n"],
                f"P@1 {a}": row["first"]["p@1"],
                f"P@1 {b}": row["second"]["p@1"],
                "difference": row["p@1_difference"],
                f"MRR {a}": row["first"]["mrr"],
                f"MRR {b}": row["second"]["mrr"],
            }
            for relation, row in comparison["relations"].items()
        ]
        columns = ["relation", "n", f"P@1 {a}", f"P@1 {b}", "difference", f"MRR {a}", f"MRR {b}"]
        lines += [markdown_table(compare_rows, columns, digits=3), ""]
    lines += ["## Examples", ""]
    shown: dict[str, int] = {}
    for statement, rank, top in zip(
        results[0].statements, results[0].ranks, results[0].top, strict=True
    ):
        if shown.get(statement.relation, 0) >= EXAMPLES:
            continue
        shown[statement.relation] = shown.get(statement.relation, 0) + 1
        lines.append(
            f"- `{statement.text}` answer **{statement.answer}**, rank {int(rank)}; "
            f"top 3: {', '.join(top[:3])}"
        )
    lines += ["", "![P@1 per relation](lama_relations.png)", ""]
    return "\n".join(lines)


def plot_relations(
    summaries: Sequence[Mapping[str, Any]],
    comparison: Mapping[str, Any] | None,
    path: str | Path,
) -> Path:
    """Bars of P@1 per relation (two bars per relation when two models are compared)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if comparison is not None:
        relations = list(comparison["relations"])
        series = [
            (
                _name(comparison["first"]),
                [comparison["relations"][r]["first"]["p@1"] for r in relations],
            ),
            (
                _name(comparison["second"]),
                [comparison["relations"][r]["second"]["p@1"] for r in relations],
            ),
        ]
    else:
        relations = list(summaries[0]["relations"])
        series = [
            (_name(summaries[0]["model"]), [summaries[0]["relations"][r]["p@1"] for r in relations])
        ]
    figure, axis = plt.subplots(figsize=(max(4.0, 0.45 * len(relations) + 2), 3.6), dpi=100)
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        axis.bar([x + i * width for x in range(len(relations))], values, width, label=label)
    axis.set_xticks(
        [x + 0.4 - width / 2 for x in range(len(relations))],
        relations,
        rotation=60,
        ha="right",
        fontsize=8,
    )
    axis.set_ylabel("P@1")
    axis.set_ylim(0, 1)
    axis.grid(axis="y", alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return atomic_write_bytes(path, buffer.getvalue())
