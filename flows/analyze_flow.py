"""The ``analyze`` Prefect flow: ``ptm analyze``'s probes as a flow run, with the report
published as a markdown artifact (key ``lama-report``, or ``<probe>-report``:
``attack-report``, ``layer-probes-report``, ``representations-report``, ...) and the charts
embedded in it.

    from flows.analyze_flow import analyze
    analyze("runs/ernie/final", kg="kg/", output="analysis/ernie", compare="runs/no-kg/final")
    analyze("hf_bert/", probe="layers", conll="tags.conll", column=1, output="analysis/pos",
            compare="random-init", seeds=(0, 1, 2))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.analyze import lama
from flows.analyze_attack import attack
from flows.analyze_attack_report import CHART
from flows.analyze_repr import PROBES as REPR_PROBES
from flows.analyze_repr import run_and_publish
from flows.artifacts import embedded_image, publish_markdown


@flow(name="analyze", log_prints=True)
def analyze(model: str, probe: str = "lama", **settings: Any) -> dict[str, Any]:
    """Run ``probe`` on ``model``: ``lama`` with :func:`flows.analyze.lama`'s settings,
    ``attack`` with :func:`flows.analyze_attack.attack`'s, ``layers`` with
    :func:`flows.analyze_layers.layers`'s, ``representations``/``attention``/``heads`` with
    :mod:`flows.analyze_repr`'s."""
    if probe == "attack":
        return _attack(model, **settings)
    if probe == "layers":
        return _layers(model, **settings)
    if probe in REPR_PROBES:
        return run_and_publish(model, probe, **settings)
    if probe != "lama":
        known = ", ".join(["lama", "attack", "layers", *REPR_PROBES])
        raise ValueError(f"probe {probe!r} is not known; use one of {known}")
    result = lama(model, **settings)
    chart = Path(result["output"]) / "lama_relations.png"
    markdown = result["markdown"].replace(
        "![P@1 per relation](lama_relations.png)", embedded_image(chart, "P@1 per relation")
    )
    publish_markdown("lama-report", markdown, f"LAMA probe of {model}")
    overall = result["summary"]["overall"]
    print(f"LAMA: P@1 {overall['p@1']:.3f}, P@10 {overall['p@10']:.3f}, MRR {overall['mrr']:.3f}")
    return result


def _attack(model: str, **settings: Any) -> dict[str, Any]:
    result = attack(model, **settings)
    chart = Path(result["output"]) / CHART
    markdown = result["markdown"].replace(
        f"![accuracy under attack per budget]({CHART})",
        f"{embedded_image(chart, 'accuracy under attack per budget')}\n\n(chart: `{chart}`)",
    )
    publish_markdown("attack-report", markdown, f"Word-substitution attack on {model}")
    for name, budgets in result["sources"].items():
        for budget, s in budgets.items():
            print(
                f"attack ({name}, budget {budget}): accuracy {s['clean_accuracy']:.3f} -> "
                f"{s['attacked_accuracy']:.3f}, success rate {s['success_rate']:.3f}"
            )
    return result


def _layers(model: str, **settings: Any) -> dict[str, Any]:
    from flows.analyze_layers import layers

    result = layers(model, **settings)
    chart = Path(result["output"]) / "layers.png"
    markdown = result["markdown"].replace(
        "![Accuracy per layer](layers.png)",
        embedded_image(chart, "Accuracy per layer") + f"\n\n(chart: `{chart}`)",
    )
    publish_markdown("layer-probes-report", markdown, f"Layer probes of {model}")
    mix = result["models"][0]["summary"]["mix"]
    print(f"layer probes: scalar mix accuracy {mix['accuracy']['mean']:.3f}")
    return result
