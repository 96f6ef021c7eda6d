"""The `domain-adapt` flow (``ptm flow domain-adapt base=... corpus=... task=...``): the steps
of :func:`flows.domain_adaptation.domain_adapt` as Prefect tasks, the base-vs-adapted table
as a markdown artifact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prefect import flow, task

from flows.artifacts import publish_markdown
from flows.domain_adaptation import domain_adapt


def _as_task(name: str, function: Any, *args: Any) -> Any:
    return task(function, name=name, log_prints=True)(*args)


@flow(name="domain-adapt", log_prints=True)
def domain_adapt_flow(overrides: Sequence[str] | None = None) -> dict[str, Any]:
    """Domain corpus -> extend-vocab -> DAPT -> TAPT -> fine-tune -> compare, under Prefect."""
    result = domain_adapt(list(overrides or []), step=_as_task)
    publish_markdown(
        "domain-adapt-report",
        result["table"],
        description="base vs domain-adapted model, fine-tuned on the same task and seeds",
    )
    print(result["table"])
    return result
