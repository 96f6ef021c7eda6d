"""``ptm deploy --serve`` stops on Ctrl-C or SIGTERM with one line, in bounded time, and
takes the runs it started with it, even when the runner swallows the interrupt (Prefect's
runner printed a traceback, then hung after SIGTERM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

_SERVE = """
import subprocess, sys, threading
from flows.deploy import serve_until_stopped

def serve():
    run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(run.pid, flush=True)
    while True:
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            if sys.argv[1] == "propagate":
                raise
            print("runner swallowed the interrupt", flush=True)

serve_until_stopped(serve, name="nightly", grace=2.0)
print("serve returned", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    ("signum", "mode"),
    [(signal.SIGINT, "propagate"), (signal.SIGTERM, "swallow"), (signal.SIGINT, "swallow")],
)
def test_serve_stops_with_one_line_and_no_orphan(signum: int, mode: str) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    run_pid = None
    try:
        assert process.stdout is not None
        run_pid = int(process.stdout.readline())
        os.kill(process.pid, signum)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ptm: deploy --serve nightly stopped"), err
    assert signal.Signals(signum).name in lines[0] or mode == "propagate"
    assert "Traceback" not in err and "serve returned" not in out
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and psutil.pid_exists(run_pid):
        if psutil.Process(run_pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.1)
    alive = psutil.pid_exists(run_pid) and psutil.Process(run_pid).status() != "zombie"
    if alive:
        os.kill(run_pid, signal.SIGKILL)
    assert not alive, "the run the server started outlived it"
