"""The `evaluate` flow: :func:`flows.evaluation.evaluate_in_process` as a Prefect flow run,
each score a task (``ptm evaluate --prefect``, ``ptm deploy evaluate``, the demo and
retrain flows), the report also published as a markdown artifact."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from prefect import Flow, task

from flows.evaluation import (
    MIN_COMPARE_TOKENS,
    check_evaluation,
    evaluate_in_process,
    evaluation_of,
)


@task(name="evaluate-ernie-thu")
def evaluate_ernie_thu_task(
    model_dir: str, linked_corpus: str, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """MLM/NSP/dEA metrics of an ERNIE-THU checkpoint (or of its random init)."""
    return evaluation_of("ernie_thu").score(model_dir, linked_corpus, seed, random_init)


class _CheckedFlow(Flow[..., dict[str, Any]]):
    """The evaluate flow, with its arguments checked before Prefect starts a run.

    A user's mistake (a missing directory, a broken ``config.json``) then reaches the
    caller, and ``ptm evaluate --prefect``, as one line: no temporary API server is
    started and no failed run is logged with a traceback. Deployed runs check inside the
    flow instead.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        params = {k: v for k, v in kwargs.items() if k not in ("return_state", "wait_for")}
        bound = inspect.signature(self.fn).bind(*args, **params)
        bound.apply_defaults()
        arguments = bound.arguments
        check_evaluation(
            arguments["model_dir"],
            arguments["corpus"],
            arguments["baseline"],
            arguments["report_path"],
        )
        return super().__call__(*args, **kwargs)


def _checked_flow(fn: Callable[..., dict[str, Any]]) -> _CheckedFlow:
    # Decorating keeps the function's name, so the deployment entrypoint
    # (flows/evaluate.py:evaluate) still names this flow object.
    return _CheckedFlow(fn, name="evaluate", log_prints=True)


@_checked_flow
def evaluate(
    model_dir: str,
    corpus: str | None = None,
    baseline: str = "random",
    seed: int = 0,
    report_path: str | None = None,
    tasks: list[str] | None = None,
    task_overrides: list[str] | None = None,
    min_tokens: int = MIN_COMPARE_TOKENS,
) -> dict[str, Any]:
    """Evaluate a model against a baseline and report, as a flow run.

    See :func:`flows.evaluation.evaluate_in_process` for the arguments and the result.
    """
    return evaluate_in_process(
        model_dir, corpus, baseline, seed, report_path, tasks, task_overrides, min_tokens
    )
