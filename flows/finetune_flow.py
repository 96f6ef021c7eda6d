"""The `finetune` flow: :mod:`flows.finetune`'s runs under Prefect, one task per run, the
dev metrics (mean ± std over seeds) as a markdown artifact (``ptm flow finetune``,
``ptm finetune --prefect``)."""

from __future__ import annotations

import json
from typing import Any

from prefect import flow, task

from flows.artifacts import publish_markdown
from flows.finetune import format_summary, run_one, run_sweep, summarize, summary_markdown


@task(name="finetune-run", log_prints=True)
def finetune_run(overrides: list[str]) -> dict[str, Any]:
    """One fine-tuning run (resumes from the run's last checkpoint if there is one); its
    end table (metrics and folders) goes to the run log."""
    from flows.end_table import print_finetune_table

    run = run_one(overrides)
    print_finetune_table(run)
    return run


@flow(name="finetune", log_prints=True)
def finetune(overrides: list[str] | None = None, multirun: bool = False) -> dict[str, Any]:
    """Fine-tune under Prefect: one run, or with ``multirun`` every run of the sweep.

    Publishes a markdown artifact with the dev metrics (mean ± std over seeds per setting).
    """
    overrides = list(overrides or [])
    if multirun:
        result = run_sweep(overrides, runner=lambda combo: finetune_run(combo))
    else:
        run = finetune_run(overrides)
        rows = summarize([run])
        result = {"runs": [run], "summary": rows, "table": format_summary(rows)}
    publish_markdown(
        "finetune-report",
        summary_markdown(result["summary"]),
        description="dev metrics, mean ± std over seeds",
    )
    print(result["table"])
    print(json.dumps(result["summary"], indent=1))
    return result
