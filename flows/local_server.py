"""The local Prefect server of ``ptm server start``: started once, reused by every flow run.

``ptm server start`` runs Prefect's API server and UI in the background (``python -m
uvicorn ...``, the command ``prefect server start --background`` runs), in a session of
its own so that it outlives the command and the terminal, and records it in
``$PREFECT_HOME/ptm-server.json`` (pid, start time, URL). Flow runs (``--prefect``,
``ptm flow``, ``ptm demo``, ``ptm retrain``, ``ptm deploy``) find it there through
:func:`prefect_api` and report to it, so the "View at http://127.0.0.1:..." links they print
stay valid after the command ends. ``ptm server stop`` stops it.

Plain commands never start or use a server. A flow run with no server configured or
running starts a temporary one bound to the command (:func:`flows.server.temporary_server`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flows.execution import prefect_configured
from flows.processes import is_running, started_at

#: The record of the running server, under ``PREFECT_HOME``.
RECORD_NAME = "ptm-server.json"
#: Its output (uvicorn's errors), under ``PREFECT_HOME``.
LOG_NAME = "ptm-server.log"
#: Prefect's own default port, taken when it is free.
DEFAULT_PORT = 4200
#: Shown when a flow run starts a temporary server.
TEMPORARY_NOTE = (
    "Prefect: no server configured or running, so this flow run uses a temporary one; its "
    "'View at' links die with this command (`ptm server start` keeps a server running)"
)


def prefect_home() -> Path:
    """``$PREFECT_HOME``, or Prefect's default ``~/.prefect``."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def read_record(home: Path | None = None) -> dict[str, Any] | None:
    """The recorded server when its process still runs (same pid and start time), else
    ``None`` (a stale record, left by a reboot or a kill, is removed)."""
    path = (home or prefect_home()) / RECORD_NAME
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pid, started, url = int(record["pid"]), float(record["started"]), str(record["url"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        record = None
    if record is not None and url and is_running(pid, started):
        return dict(record)
    with contextlib.suppress(OSError):
        path.unlink()
    return None


def running_server_url(home: Path | None = None) -> str | None:
    """The API URL (``.../api``) of the server ``ptm server start`` runs, when it answers."""
    record = read_record(home)
    if record is None or not _healthy(record["url"]):
        return None
    return str(record["url"])


def _port(port: int | None) -> int:
    candidates = [port] if port is not None else [DEFAULT_PORT, 0]
    for candidate in candidates:
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
            try:
                sock.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise ValueError(f"--port {port} is in use on 127.0.0.1; give another port")


def start_server(port: int | None = None, timeout: float | None = None) -> dict[str, Any]:
    """Start the local server in the background, or return the one already running.

    Args:
        port: loopback port (default 4200 when free, else any free port).
        timeout: seconds to wait for it to answer (default
            ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``, else 90).

    Returns:
        The record: ``pid``, ``started``, ``url`` (the API URL), ``ui``, ``log``, and
        ``already`` (True when it was running before).

    Raises:
        RuntimeError: the server exited or did not answer in time (with its log's tail).
    """
    home = prefect_home()
    existing = read_record(home)
    if existing is not None:
        return {**existing, "already": True}
    home.mkdir(parents=True, exist_ok=True)
    chosen = _port(port)
    url = f"http://127.0.0.1:{chosen}/api"
    spec = importlib.util.find_spec("prefect")  # its folder, without importing it (2 s)
    assert spec is not None and spec.origin is not None
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(Path(spec.origin).parent.parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",  # loopback only
        "--port",
        str(chosen),
        "--log-level",
        "error",
    ]
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(chosen),
        PREFECT_UI_API_URL=url,
        PREFECT__SERVER_FINAL="1",
    )
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    log_path = home / LOG_NAME
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,  # outlives this command, its terminal and its Ctrl-C
        )
    limit = timeout or float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 90))
    deadline = time.monotonic() + limit
    while not _healthy(url, timeout=1.0):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.terminate()
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(
                f"the Prefect server did not start on port {chosen} within {limit:.0f} s "
                f"(log: {log_path}):\n{tail}"
            )
        time.sleep(0.25)
    started = started_at(process.pid)
    record = {
        "pid": process.pid,
        "started": started if started is not None else time.time(),
        "url": url,
        "ui": url.removesuffix("/api"),
        "log": str(log_path),
    }
    from ptm_core.atomic import atomic_write_text

    atomic_write_text(home / RECORD_NAME, json.dumps(record))
    return {**record, "already": False}


def stop_server(timeout: float = 10.0) -> dict[str, Any] | None:
    """Stop the recorded server (SIGTERM, then SIGKILL after ``timeout``); its record, or
    ``None`` when none was running."""
    home = prefect_home()
    record = read_record(home)
    if record is None:
        return None
    pid, started = int(record["pid"]), float(record["started"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while is_running(pid, started) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_running(pid, started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        (home / RECORD_NAME).unlink()
    return record


@contextlib.contextmanager
def prefect_api() -> Iterator[str | None]:
    """The API server the flow runs of the body report to.

    The user's own (``PREFECT_API_URL`` set: nothing to do, yields ``None``); else the one
    ``ptm server start`` runs (pointed at for the body, also through the environment so
    child processes such as Dask workers use it); else a temporary one that dies with
    this command, announced by :data:`TEMPORARY_NOTE`.

    Yields:
        The API URL used, or ``None`` for the user's own.
    """
    if prefect_configured():
        yield None
        return
    url = running_server_url()
    if url is None:
        from flows.server import temporary_server

        print(TEMPORARY_NOTE, file=sys.stderr)
        with temporary_server() as temporary:
            yield temporary
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    prior = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            yield url
    finally:
        if prior is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = prior
