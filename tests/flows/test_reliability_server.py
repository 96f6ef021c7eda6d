"""The temporary Prefect server of a ``ptm`` command never outlives the command (defect 8)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
KG = ROOT / "data_specs" / "knowledge_graph" / "sample"

# `ptm link --prefect` through flows.cli.main, held inside the flow (reading the corpus blocks, after
# writing a marker file) so that the kill lands while the command and its server are both
# alive, however fast or loaded the machine is.
HELD_LINK = textwrap.dedent(
    """
    import pathlib, sys, time
    import flows.entity_linking as link

    def held(*args, **kwargs):
        pathlib.Path(sys.argv[4]).touch()
        time.sleep(600)

    link.iter_text_corpus = held
    from flows.cli import main

    sys.exit(main(["link", "--prefect", "--corpus", sys.argv[1], "--kg", sys.argv[2], "--output", sys.argv[3]]))
    """
)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_LOCAL_STORAGE_PATH=str(home / "storage"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        HF_HUB_OFFLINE="1",
    )
    return env


def _servers_of(home: Path) -> list[psutil.Process]:
    """Live uvicorn processes whose environment names ``home`` as PREFECT_HOME."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if "uvicorn" not in (process.info["cmdline"] or []):
                continue
            if process.environ().get("PREFECT_HOME") == str(home):
                found.append(process)
        except psutil.Error:
            continue
    return found


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def prefect_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "prefect-home"
    home.mkdir()
    yield home
    for process in _servers_of(home):  # never leak a server, whatever the outcome
        process.kill()


@pytest.mark.integration
def test_kill_9_of_ptm_link_leaves_no_prefect_server(tmp_path: Path, prefect_home: Path) -> None:
    marker = tmp_path / "flow-running"
    command = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HELD_LINK,
            str(CORPUS),
            str(KG),
            str(tmp_path / "linked.jsonl"),
            str(marker),
        ],
        env=_env(prefect_home),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The flow runs only once its server answers /api/health.
        deadline = time.monotonic() + 240
        while not marker.exists() and command.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert marker.exists(), "the link flow never started"
        assert command.poll() is None, "ptm link must still be running when it is killed"
        servers = _servers_of(prefect_home)
        assert servers, "no temporary server found for this PREFECT_HOME"
        assert all(s.pid in _descendants(command.pid) for s in servers)
        os.kill(command.pid, signal.SIGKILL)
        command.wait(timeout=10)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    deadline = time.monotonic() + 10
    # On a loaded machine a server may be off the list but not yet exited: wait for both.
    while time.monotonic() < deadline and (
        _servers_of(prefect_home) or not all(_gone(s) for s in servers)
    ):
        time.sleep(0.2)
    left = _servers_of(prefect_home)
    assert not left, f"Prefect server(s) {[p.pid for p in left]} outlived the killed command"
    assert all(_gone(s) for s in servers)


def _descendants(pid: int) -> set[int]:
    return {p.pid for p in psutil.Process(pid).children(recursive=True)}


def test_reaper_stops_a_recorded_server_whose_command_is_gone(tmp_path: Path) -> None:
    from flows.server import RECORDS_DIR, reap_orphaned_servers

    home = tmp_path / "home"
    (home / RECORDS_DIR).mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_started = psutil.Process(dead.pid).create_time()
    dead.wait()
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    kept = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        for server, parent, parent_started in (
            (orphan, dead.pid, dead_started),  # its command is gone
            (kept, os.getpid(), psutil.Process().create_time()),  # its command lives (us)
        ):
            record = {
                "pid": server.pid,
                "started": psutil.Process(server.pid).create_time(),
                "parent": parent,
                "parent_started": parent_started,
            }
            (home / RECORDS_DIR / f"{server.pid}.json").write_text(json.dumps(record))
        # A stale record whose pid now names another process (here: this test) is dropped
        # without a signal: the start time does not match.
        stale = {"pid": os.getpid(), "started": 1.0, "parent": dead.pid, "parent_started": 1.0}
        (home / RECORDS_DIR / "1.json").write_text(json.dumps(stale))

        assert reap_orphaned_servers(home) == [orphan.pid]
        assert orphan.wait(timeout=10) == -signal.SIGTERM
        assert kept.poll() is None
        assert sorted(p.name for p in (home / RECORDS_DIR).iterdir()) == [f"{kept.pid}.json"]
    finally:
        for process in (orphan, kept):
            if process.poll() is None:
                process.kill()
                process.wait()


def test_user_api_url_starts_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows import server

    def no_start(*args: object, **kwargs: object) -> None:
        raise AssertionError("a server was started although PREFECT_API_URL is set")

    monkeypatch.setattr(server.ParentBoundServer, "start", no_start)
    with (
        temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}),
        server.temporary_server() as url,
    ):
        assert url is None
        assert PREFECT_API_URL.value() == "http://127.0.0.1:9/api"
