"""The ``analyze`` Prefect flow: ``ptm analyze``'s probes as a flow run, with the report
published as a markdown artifact (key ``lama-report``, or ``<probe>-report``) and the
charts embedded in it.

    from flows.analyze_flow import analyze
    analyze("runs/ernie/final", kg="kg/", output="analysis/ernie", compare="runs/no-kg/final")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow

from flows.analyze import lama
from flows.analyze_repr import PROBES as REPR_PROBES
from flows.analyze_repr import run_and_publish
from flows.artifacts import embedded_image, publish_markdown


@flow(name="analyze", log_prints=True)
def analyze(model: str, probe: str = "lama", **settings: Any) -> dict[str, Any]:
    """Run ``probe`` on ``model``: ``lama`` with :func:`flows.analyze.lama`'s settings, or
    ``representations``/``attention``/``heads`` with :mod:`flows.analyze_repr`'s."""
    if probe in REPR_PROBES:
        return run_and_publish(model, probe, **settings)
    if probe != "lama":
        raise ValueError(f"probe {probe!r} is not known; use lama, {', '.join(REPR_PROBES)}")
    result = lama(model, **settings)
    chart = Path(result["output"]) / "lama_relations.png"
    markdown = result["markdown"].replace(
        "![P@1 per relation](lama_relations.png)", embedded_image(chart, "P@1 per relation")
    )
    publish_markdown("lama-report", markdown, f"LAMA probe of {model}")
    overall = result["summary"]["overall"]
    print(f"LAMA: P@1 {overall['p@1']:.3f}, P@10 {overall['p@10']:.3f}, MRR {overall['mrr']:.3f}")
    return result
