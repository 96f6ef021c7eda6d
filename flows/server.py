"""The temporary Prefect server of a ``ptm`` flow run, bound to the life of that command.

Plain commands use no server. A flow run (``--prefect``, ``ptm flow``, ``ptm demo``, ...)
reports to ``PREFECT_API_URL``, else to the server of ``ptm server start``
(:mod:`flows.local_server`), and only when neither exists to this temporary one.

With no ``PREFECT_API_URL``, Prefect 3 starts a temporary API server on first use
(``prefect.server.api.server.SubprocessASGIServer``: ``python -m uvicorn ...`` in a child
process, about 230 MB) and stops it from an ``atexit`` hook. A ``kill -9`` (or an OOM
kill) of the command skips that hook, and the server then runs on, orphaned, forever.

:func:`temporary_server` starts that server itself, before any flow runs, and points
Prefect at it, so that:

- on Linux the child asks the kernel for ``SIGTERM`` when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, set in the child before it execs uvicorn, so no Python
  code runs between ``fork`` and ``exec``);
- on every platform the server's pid is recorded under ``PREFECT_HOME/ptm-servers``, and
  the next ``ptm`` command reaps a server whose command is gone (a second line of defence,
  and the only one where ``prctl`` does not exist).

Nothing is started when the user set ``PREFECT_API_URL`` (their own server) or disabled
Prefect's ephemeral mode.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prefect.server.api.server import SubprocessASGIServer

from flows.processes import is_running as _is_running
from flows.processes import started_at as _started_at

logger = logging.getLogger(__name__)

#: Folder under ``PREFECT_HOME`` with one ``<pid>.json`` record per running server.
RECORDS_DIR = "ptm-servers"

#: Signal the kernel sends the server when its parent dies. SIGTERM lets uvicorn close
#: the SQLite database cleanly; it exits in well under a second with no client left.
PARENT_DEATH_SIGNAL = signal.SIGTERM

#: The server's event services, whose flush a server stop cancels (see _BOOTSTRAP).
SHUTDOWN_QUIET_LOGGERS = (
    "prefect.server.services.task_run_recorder",
    "prefect.server.events.services.event_persister",
    "prefect.server.events.triggers",
    "prefect.server.events.ordering",
)

# Run by the child's interpreter: on Linux, ask for PARENT_DEATH_SIGNAL on the parent's
# death (a parent that died before prctl took effect is caught by the getppid() check: the
# child was re-parented already, so the window is closed both ways); then run uvicorn in
# this interpreter. Before that, a filter drops one kind of record from the server's
# event services: an error whose exception is a CancelledError. Stopping the server cancels
# their last flush into its database (the UI's history of the final task states), and each
# then logs "Error flushing N events" with 4-5 CancelledError tracebacks, after the
# command's outputs are complete. Any other error of those services still shows.
_BOOTSTRAP = f"""\
import asyncio, logging, os, runpy, sys
parent, signum = int(sys.argv[1]), int(sys.argv[2])
if sys.platform.startswith("linux"):
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)

def _cancelled_at_shutdown(record):
    error = record.exc_info[1] if record.exc_info else None
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, asyncio.CancelledError):
            return False
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return True

for name in {SHUTDOWN_QUIET_LOGGERS!r}:
    logging.getLogger(name).addFilter(_cancelled_at_shutdown)
sys.argv = sys.argv[3:]  # "uvicorn", then its arguments
runpy.run_module("uvicorn", run_name="__main__", alter_sys=True)
"""


class ParentBoundServer(SubprocessASGIServer):
    """Prefect's temporary API server, started so that it dies with this process.

    The uvicorn command and its environment are those of Prefect 3's own
    ``SubprocessASGIServer._run_uvicorn_command``; only the launch differs (through
    :data:`_BOOTSTRAP`: bound to this process on Linux, quiet at shutdown), and each launch is recorded under ``records`` (when
    set) for :func:`reap_orphaned_servers`. Start it from a thread that outlives its use:
    the kernel signals the child when the *thread* that forked it exits.
    """

    records: Path | None = None
    _record: Path | None = None

    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        import prefect
        from prefect.settings import get_current_settings

        arguments = [  # Prefect's own `python -m uvicorn ...` arguments
            "--app-dir",
            str(prefect.__module_path__.parent),
            "--factory",
            "prefect.server.api.server:create_app",
            "--host",
            "127.0.0.1",  # loopback only
            "--port",
            str(self.port),
            "--log-level",
            "error",
            "--lifespan",
            "on",
        ]
        command = [
            sys.executable,
            "-c",
            _BOOTSTRAP,
            str(os.getpid()),
            str(int(PARENT_DEATH_SIGNAL)),
            "uvicorn",  # in the command line too, where ps and process scans look
            *arguments,
        ]
        process = subprocess.Popen(
            command,
            env={
                **os.environ,
                "PREFECT_UI_ENABLED": "0",
                "PREFECT__SERVER_EPHEMERAL": "1",
                "PREFECT__SERVER_FINAL": "1",
                **get_current_settings().to_environment_variables(exclude_unset=True),
            },
        )
        self._forget()  # a relaunch on another port (uvicorn exit code 3) replaces it
        if self.records is not None:
            self._record = _write_record(self.records, process.pid)
        return process

    def stop(self) -> None:
        """Stop the server (Prefect's own stop) and drop its record."""
        super().stop()
        self._forget()

    def _forget(self) -> None:
        if self._record is not None:
            with contextlib.suppress(OSError):
                self._record.unlink()
            self._record = None


def _write_record(folder: Path, pid: int) -> Path | None:
    from ptm_core.atomic import atomic_write_text

    started, parent_started = _started_at(pid), _started_at(os.getpid())
    if started is None or parent_started is None:
        return None  # unverifiable later (no psutil): no record rather than a risky kill
    path = folder / f"{pid}.json"
    record = {
        "pid": pid,
        "started": started,
        "parent": os.getpid(),
        "parent_started": parent_started,
    }
    try:
        atomic_write_text(path, json.dumps(record))
    except OSError:
        return None
    return path


def _stop_pid(pid: int, started: float, timeout: float = 5.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _is_running(pid, started):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def reap_orphaned_servers(home: str | Path) -> list[int]:
    """Stop temporary servers recorded under ``home`` whose ``ptm`` command is gone.

    A record whose command still runs belongs to another live command and is left alone;
    a recorded pid that now names another process (pid reuse) is never signalled.

    Args:
        home: the ``PREFECT_HOME`` the servers were started with.

    Returns:
        The pids of the servers stopped.
    """
    reaped: list[int] = []
    folder = Path(home) / RECORDS_DIR
    if not folder.is_dir() or _started_at(os.getpid()) is None:
        return reaped  # nothing recorded, or no psutil to tell live from dead
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            pid, started = int(record["pid"]), float(record["started"])
            parent, parent_started = int(record["parent"]), float(record["parent_started"])
        except (OSError, ValueError, KeyError, TypeError):
            record = None  # unreadable (half-written by hand?): drop it, signal nothing
        if record is not None and _is_running(parent, parent_started):
            continue
        if record is not None and _is_running(pid, started):
            logger.warning("stopping Prefect server %d, left running by a killed command", pid)
            _stop_pid(pid, started)
            reaped.append(pid)
        with contextlib.suppress(OSError):
            path.unlink()
    return reaped


def _drain_prefect_workers(stall: float = 30.0) -> None:
    """Send the logs and events Prefect still queues to the server before it stops.

    Prefect drains these workers at interpreter exit, after its own server's ``atexit``
    stop; this server stops earlier (when the command's work is done), so drain first,
    as ``prefect_test_harness`` does, or the last records fail with "connection refused".

    A flow of many tasks ends with thousands of queued events (``ptm link`` on 100k
    documents: 12,500 shard tasks, 7,110 events left when the flow finished, sent at about
    120 a second). Draining goes on while the queue shrinks; only when it stops shrinking
    for ``stall`` seconds are the rest dropped. Before, a fixed 30 s left 2,587 events
    behind, and each then waited about 7 s for the stopped server at interpreter exit: the
    finished command hung for hours.
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):  # best effort: never mask the command's result
            _drain_while_moving(worker, stall)


def _drain_while_moving(worker: Any, stall: float) -> None:
    with worker._instance_lock, worker._instance_cache_lock:  # Prefect's QueueService
        instances = list(worker._instances.values())
    for instance in instances:
        future = instance._drain(at_exit=False)
        left = instance._queue.qsize()
        while True:
            try:
                future.result(timeout=stall)
                break
            except concurrent.futures.TimeoutError:
                now = instance._queue.qsize()
                if now < left:  # still moving: keep waiting
                    left = now
                    continue
                dropped = _discard_queued(instance._queue)
                print(
                    f"Prefect: {dropped} {worker.__name__} records were not sent (the server "
                    f"took none in {stall:.0f} s); the run's own outputs are complete",
                    file=sys.stderr,
                )
                break


def _discard_queued(items: queue.Queue[Any]) -> int:
    """Empty a worker's queue, keeping its stop marker (``None``) so the worker exits."""
    dropped = 0
    while True:
        try:
            item = items.get_nowait()
        except queue.Empty:
            break
        dropped += item is not None
    items.put_nowait(None)
    return dropped


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def temporary_server() -> Iterator[str | None]:
    """Run the body against a temporary Prefect server that dies with this process.

    Starts nothing (yields ``None``) when ``PREFECT_API_URL`` is set or Prefect's
    ephemeral mode is disabled. Otherwise reaps servers orphaned by killed commands,
    starts a :class:`ParentBoundServer` on a free loopback port, points this process at
    it (settings, and the environment so that child processes such as Dask workers use
    it too), and stops it on exit. Enter it from the main thread (see
    :class:`ParentBoundServer`).

    Yields:
        The API URL of the server started, or ``None``.
    """
    from prefect.settings import PREFECT_API_URL, get_current_settings, temporary_settings

    settings = get_current_settings()
    if settings.api.url or not settings.server.ephemeral.enabled:
        yield None
        return
    records = Path(settings.home).expanduser() / RECORDS_DIR
    with contextlib.suppress(OSError):
        reap_orphaned_servers(records.parent)
    server = ParentBoundServer(port=_free_port())
    server.records = records
    # Threads started without a copy of our context read Prefect's import-time settings
    # (no API URL) and ask SubprocessASGIServer() for the default server: make that this
    # one, not a second, unbound server (prefect_test_harness does the same).
    instances = SubprocessASGIServer._instances
    prior_default = instances.get(None)
    instances[None] = server
    prior_env = os.environ.get("PREFECT_API_URL")
    try:
        server.start()
        os.environ["PREFECT_API_URL"] = server.api_url
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            yield server.api_url
    finally:
        _drain_prefect_workers()
        if prior_env is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = prior_env
        server.stop()
        if prior_default is not None:
            instances[None] = prior_default
        else:
            instances.pop(None, None)
