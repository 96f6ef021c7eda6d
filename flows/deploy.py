"""Scheduling: register a flow as a deployment with a cron schedule, optionally serve it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
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
        serve_until_stopped(
            lambda: target.serve(name=deployment_name, cron=cron, parameters=parameters or {}),
            name=deployment_name,
        )
        return deployment_name
    # Prefect's sync/async dual API types these calls as "value or coroutine"; called
    # outside an event loop they return the value.
    deployment = cast(
        RunnerDeployment,
        target.to_deployment(name=deployment_name, cron=cron, parameters=parameters or {}),
    )
    return str(cast(Any, deployment).apply())


#: Seconds a stopped ``--serve`` waits for Prefect's own shutdown before it exits anyway.
STOP_GRACE_SECONDS = 5.0


def serve_until_stopped(
    serve: Callable[[], object], *, name: str, grace: float = STOP_GRACE_SECONDS
) -> None:
    """Run ``serve`` (a blocking Prefect runner) until it returns, Ctrl-C or ``SIGTERM``.

    On Ctrl-C or ``SIGTERM`` the process prints one line and exits with 130 within
    ``grace`` seconds. Left to itself, Prefect's runner printed a ``KeyboardInterrupt``
    traceback when interrupted while a run was starting, and then hung on ``SIGTERM``
    (its shutdown waits for the flow-run process and its event-loop threads). The flow
    runs this process started are killed: a scheduled run is retried by the schedule,
    and every ptm run resumes from its last checkpoint.

    Args:
        serve: Blocks while serving.
        name: The deployment, for the message.
        grace: Seconds to wait for ``serve`` to unwind before exiting anyway.
    """
    stopping = threading.Event()
    received = [int(signal.SIGINT)]  # a KeyboardInterrupt raised by Python itself

    def stop(signum: int, _frame: FrameType | None) -> None:
        if stopping.is_set():
            _exit_now(name, signum)  # a second signal: no more waiting
        received[0] = signum
        stopping.set()
        timer = threading.Timer(grace, _exit_now, args=(name, signum))
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        serve()
    except KeyboardInterrupt:
        _exit_now(name, received[0])
    except BaseException:
        if stopping.is_set():  # Prefect turned the interrupt into its own error
            _exit_now(name, received[0])
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_now(name: str, signum: int) -> None:
    _kill_children()
    print(
        f"ptm: deploy --serve {name} stopped ({signal.Signals(signum).name}); the flow runs "
        "it had started were stopped too (a ptm run resumes from its last checkpoint)",
        file=sys.stderr,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def _kill_children() -> None:
    try:
        import psutil
    except ImportError:
        return
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
