"""Scheduling: register a flow as a deployment with a cron schedule, optionally serve it."""

from __future__ import annotations

from typing import Any, cast

from prefect import Flow
from prefect.deployments.runner import RunnerDeployment

from flows.evaluate import evaluate
from flows.pretrain import pretrain
from flows.retrain import retrain

DEPLOYABLE: dict[str, Flow[Any, Any]] = {
    "retrain": retrain,
    "pretrain": pretrain,
    "evaluate": evaluate,
}


def deploy(
    flow_name: str,
    *,
    cron: str,
    name: str | None = None,
    parameters: dict[str, Any] | None = None,
    serve: bool = False,
) -> str:
    """Register ``flow_name`` with a cron schedule on the Prefect API.

    With ``serve=False`` the deployment (and its schedule) is created and this returns its
    id; a process started with ``serve=True`` (or ``prefect worker``) runs the scheduled
    runs. Scheduled runs need a Prefect server (``prefect server start``); the temporary
    server that plain flow runs start has no scheduler.

    Args:
        flow_name: one of :data:`DEPLOYABLE`.
        cron: cron expression, e.g. ``"0 3 * * *"`` (03:00 every day).
        name: deployment name (default ``<flow>-scheduled``).
        parameters: flow parameters for the scheduled runs.
        serve: block and execute the scheduled runs in this process.
    """
    if flow_name not in DEPLOYABLE:
        raise ValueError(f"unknown flow {flow_name!r}; deployable: {', '.join(DEPLOYABLE)}")
    target = DEPLOYABLE[flow_name]
    deployment_name = name or f"{flow_name}-scheduled"
    if serve:
        target.serve(name=deployment_name, cron=cron, parameters=parameters or {})
        return deployment_name
    # Prefect's sync/async dual API types these calls as "value or coroutine"; called
    # outside an event loop they return the value.
    deployment = cast(
        RunnerDeployment,
        target.to_deployment(name=deployment_name, cron=cron, parameters=parameters or {}),
    )
    return str(cast(Any, deployment).apply())
