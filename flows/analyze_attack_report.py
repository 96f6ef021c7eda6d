"""The attack report: figures per budget and candidate source, example rows with the
changed words marked, and the accuracy-under-attack curve (``ptm analyze MODEL attack``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table, save_figure

#: The chart's file name inside the output folder.
CHART = "attack.png"


def marked(text: str, changed: Sequence[Mapping[str, Any]], spans: Sequence[Any]) -> str:
    """``text`` with each changed word as ``~~old~~ **new**`` (markdown)."""
    from ptm_core.analysis.attack_words import with_words

    marks = {int(c["index"]): f"~~{c['old']}~~ **{c['new']}**" for c in changed}
    return with_words(text, spans, marks)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def attack_markdown(record: Mapping[str, Any], *, shown: int) -> str:
    """The report of :func:`flows.analyze_attack.attack`'s ``record``."""
    settings = record["settings"]
    lines = [f"# Word-substitution attack on `{record['model']}`", ""]
    lines.append(
        f"{record['examples']} labelled examples from `{record['data']}`; the examples the "
        "model gets right are attacked (TextFooler's greedy search: words ranked by the drop "
        "of the true class's probability when deleted, each replaced by the candidate that "
        "changes the prediction or lowers that probability most). Constraints: stop words "
        "are never changed nor inserted, a substitute is one whole word, at most "
        f"{settings['max_perturbed']:g} of each text's words change"
        + (f" (and at most {settings['max_words']})" if settings["max_words"] is not None else "")
        + "."
    )
    lines.append("")
    for name, source in record["sources"].items():
        lines.append(f"- **{name}**: {source['description']}")
    lines.append("")
    rows = []
    for name, source in record["sources"].items():
        for budget, s in source["budgets"].items():
            rows.append(
                {
                    "candidates": name,
                    "budget": f"{float(budget):g}",
                    "clean acc.": s["clean_accuracy"],
                    "acc. under attack": s["attacked_accuracy"],
                    "success rate": s["success_rate"],
                    "perturbed words": s["perturbed_share"],
                    "queries/example": s["queries_per_example"],
                }
            )
    columns = [
        "candidates",
        "budget",
        "clean acc.",
        "acc. under attack",
        "success rate",
        "perturbed words",
        "queries/example",
    ]
    lines += [markdown_table(rows, columns, digits=3), ""]
    lines.append(
        "Success rate: over the examples right before the attack. Perturbed words: mean "
        "share of a text's words changed, over the successful attacks. Queries: texts the "
        "classifier scored per attacked example, the clean prediction included."
    )
    lines.append("")
    lines += [f"![accuracy under attack per budget]({CHART})", ""]
    for name, source in record["sources"].items():
        examples = [e for e in source["examples"] if e["status"] == "succeeded"][:shown]
        lines += [
            f"## Successful attacks, {name} candidates (budget {settings['max_perturbed']:g})",
            "",
        ]
        if not examples:
            lines += ["No attack succeeded at this budget.", ""]
            continue
        table = [
            {
                "line": e["line"],
                "label": e["label"],
                "adversarial (changed words marked)": _cell(e["marked"]),
                "prediction": e["prediction"],
            }
            for e in examples
        ]
        columns = ["line", "label", "adversarial (changed words marked)", "prediction"]
        lines += [markdown_table(table, columns), ""]
    return "\n".join(lines)


def plot_budgets(record: Mapping[str, Any], path: str | Path) -> Path:
    """Accuracy under attack against the budget, one line per candidate source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.0, 3.4), dpi=100)
    clean = None
    for name, source in record["sources"].items():
        budgets = sorted(source["budgets"], key=float)
        axis.plot(
            [float(b) for b in budgets],
            [source["budgets"][b]["attacked_accuracy"] for b in budgets],
            marker="o",
            label=f"under attack ({name})",
        )
        clean = source["budgets"][budgets[0]]["clean_accuracy"]
    if clean is not None:
        axis.axhline(clean, color="grey", linestyle="--", label="clean")
    axis.set_xlabel("budget (share of words changed at most)")
    axis.set_ylabel("accuracy")
    axis.set_ylim(0, 1.02)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return save_figure(figure, path)
