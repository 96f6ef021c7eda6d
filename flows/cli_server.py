"""``ptm server``: one local Prefect server that outlives the command, for flow runs.

ptm server start [--port 4200]   # in the background; recorded under $PREFECT_HOME
ptm server status                # its URL, or that none runs
ptm server stop

Plain commands (``ptm prepare``, ``ptm evaluate``, ...) never need it. Flow runs
(``--prefect``, ``ptm flow``, ``ptm demo``, ``ptm retrain``, ``ptm deploy``) report to it,
so the "View at" links they print stay valid after they end.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

KIND = "server"


def add_parser(commands: Any) -> None:
    """Add ``server start|stop|status`` to the ``ptm`` sub-commands."""
    server = commands.add_parser(
        KIND,
        help="start, stop or show the local Prefect server that flow runs report to",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    server.add_argument("action", choices=["start", "stop", "status"])
    server.add_argument(
        "--port", type=int, default=None, help="start: loopback port (default 4200 if free)"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ptm server ACTION``; returns the exit code (status: 1 when none runs)."""
    from flows.local_server import prefect_home, read_record, start_server, stop_server

    if args.action == "start":
        try:
            record = start_server(args.port)
        except (RuntimeError, ValueError) as exc:
            print(f"ptm: {exc}", file=sys.stderr)
            return 1
        state = "already running" if record["already"] else "started"
        print(f"Prefect server {state} at {record['ui']} (pid {record['pid']})")
        print(f"flow runs (--prefect, ptm flow, ptm demo) report to {record['url']}")
        print(f"for `prefect` commands: export PREFECT_API_URL={record['url']}")
        print("stop it with `ptm server stop`")
        return 0
    if args.action == "stop":
        stopped = stop_server()
        if stopped is None:
            print(f"no Prefect server of `ptm server start` runs (PREFECT_HOME {prefect_home()})")
        else:
            print(f"stopped the Prefect server at {stopped['ui']} (pid {stopped['pid']})")
        return 0
    running = read_record()
    if running is None:
        print(f"no Prefect server of `ptm server start` runs (PREFECT_HOME {prefect_home()})")
        return 1
    print(f"Prefect server running at {running['ui']} (pid {running['pid']}, log {running['log']})")
    return 0
