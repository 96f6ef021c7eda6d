"""Where a command's work runs: directly in this process, or as a Prefect flow run.

The plain commands (``ptm prepare``, ``ptm link``, ``ptm evaluate``, ``ptm embed-kg``, ...)
call the same functions their flows wrap, in this process, without Prefect: no API server,
no flow run, no ``import prefect`` (about 2 s of start-up). The helpers here let a
function serve both ways: inside a flow run it logs to the run and maps Prefect tasks;
outside, it logs to Python's logging and runs its steps itself, with the same retries.

Nothing here imports Prefect unless it is already loaded (a flow run implies it is).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: Seconds before the second and the third attempt of a step that failed transiently
#: (the ``retry_delay_seconds`` of the flows' Prefect tasks).
RETRY_DELAYS = (1.0, 5.0)

# Errors that recur on every attempt however long one waits: a path that is missing, not a
# file, not readable or a link loop. Retrying them only repeats the failure.
_PERMANENT_OS_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
# A full disk stays full for the seconds between retries: say so at once instead.
_PERMANENT_ERRNOS = frozenset(
    {errno.ELOOP, errno.ENAMETOOLONG, errno.EROFS, errno.ENOSPC, errno.EDQUOT}
)


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed where ``exc`` failed.

    Only an :class:`OSError` (at the root of the ``__cause__`` chain, as ``link-shard``
    wraps errors with its shard) that is not about the path itself counts: an I/O error, a
    full queue, a dropped connection to a Dask worker. Data errors (``ValueError``, so
    every ``DataError``), missing files and bugs fail the same way on every attempt.
    """
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return (
        isinstance(exc, OSError)
        and not isinstance(exc, _PERMANENT_OS_ERRORS)
        and exc.errno not in _PERMANENT_ERRNOS
    )


def with_retries(step: Callable[..., T], *args: Any) -> T:
    """``step(*args)``, tried again after :data:`RETRY_DELAYS` when it fails transiently
    (:func:`is_transient`): the plain-path twin of the flows' task retries."""
    for delay in RETRY_DELAYS:
        try:
            return step(*args)
        except Exception as exc:
            if not is_transient(exc):
                raise
            logging.getLogger(__name__).warning(
                "%s failed (%s); trying again in %.0f s", _name(step), exc, delay
            )
            time.sleep(delay)
    return step(*args)


def _name(step: Callable[..., Any]) -> str:
    return getattr(step, "__name__", type(step).__name__)


def in_flow_run() -> bool:
    """Whether this thread runs inside a Prefect flow run (False when Prefect is not even
    imported: nothing can have started a run)."""
    if "prefect" not in sys.modules:
        return False
    from prefect.context import FlowRunContext

    return FlowRunContext.get() is not None


def run_logger(name: str) -> logging.Logger | logging.LoggerAdapter[Any]:
    """The flow run's logger inside a run (its lines reach the run's logs in the UI), else
    the logger ``name``."""
    if in_flow_run():
        from prefect import get_run_logger

        return get_run_logger()
    return logging.getLogger(name)


def prefect_configured() -> bool:
    """Whether the user pointed Prefect at an API server of their own.

    Read without importing Prefect: the ``PREFECT_API_URL`` environment variable, else
    ``PREFECT_API_URL`` of the active profile in ``$PREFECT_HOME/profiles.toml``
    (``prefect config set PREFECT_API_URL=...`` writes it there). When Prefect is already
    imported (a test harness, a notebook), its current settings answer.
    """
    if os.environ.get("PREFECT_API_URL"):
        return True
    if "prefect.settings" in sys.modules:
        from prefect.settings import get_current_settings

        return bool(get_current_settings().api.url)
    home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    try:
        profiles = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return False
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    profile = profiles.get("profiles", {}).get(active, {})
    return bool(isinstance(profile, dict) and profile.get("PREFECT_API_URL"))
