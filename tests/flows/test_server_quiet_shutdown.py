"""Issue 31, item 20: `ptm link` exited 0 with complete output but printed "Error flushing 1
events" and CancelledError tracebacks as Prefect's temporary server stopped (its event
services' last flush, cancelled by the stop). Those records go; real errors still show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.server import ParentBoundServer

FAKE_UVICORN = """\
import asyncio, logging, sys
logging.basicConfig(stream=sys.stderr, format="%(levelname)s %(name)s - %(message)s")
recorder = logging.getLogger("prefect.server.services.task_run_recorder")
try:
    try:
        raise asyncio.CancelledError("Cancelled via cancel scope")
    except BaseException as exc:
        raise RuntimeError("while closing the session") from exc
except BaseException:
    recorder.exception("Error flushing 1 events (1 to retry, 0 dropped)")
try:
    raise OSError("database disk image is malformed")
except OSError:
    recorder.exception("Error flushing 2 events (a real one)")
print("argv", sys.argv[1:], file=sys.stderr)
"""


def test_the_cancelled_flush_at_shutdown_is_dropped_and_real_errors_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "fake" / "uvicorn"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text(FAKE_UVICORN)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    server = ParentBoundServer(port=1)  # never listens: the fake logs and exits
    monkeypatch.setattr(subprocess, "Popen", _capturing_popen(tmp_path / "err.txt"))
    process = server._run_uvicorn_command()
    assert process.wait(timeout=60) == 0
    err = (tmp_path / "err.txt").read_text()
    assert "Error flushing 2 events (a real one)" in err and "malformed" in err
    assert "Error flushing 1 events" not in err and "CancelledError" not in err
    assert "--factory" in err and "prefect.server.api.server:create_app" in err


def _capturing_popen(path: Path) -> type[subprocess.Popen[bytes]]:
    real = subprocess.Popen

    class Capturing(real):  # type: ignore[valid-type,misc]
        def __init__(self, args: list[str], **kwargs: object) -> None:
            kwargs["stderr"] = path.open("wb")
            super().__init__(args, **kwargs)  # type: ignore[arg-type]

    return Capturing


@pytest.mark.stress  # a real temporary server: 30-70 s here
def test_ptm_link_stops_its_server_without_tracebacks(tmp_path: Path) -> None:
    """The real command, on a generated corpus and KG (not the samples); before the fix,
    3 runs of 3 printed 10 such lines each (75-150 shards)."""
    kg = tmp_path / "kg"
    kg.mkdir()
    names = [f"Vorlan Tesk {i}" for i in range(12)]
    (kg / "entities.tsv").write_text(
        "id\tname\ttype\taliases\tdescription\n"
        + "".join(f"v{i}\t{n}\tplace\tTesk{i}\tA made-up place.\n" for i, n in enumerate(names)),
        encoding="utf-8",
    )
    (kg / "triples.tsv").write_text(
        "".join(f"v{i}\tborders\tv{i + 1}\n" for i in range(11)), encoding="utf-8"
    )
    corpus = tmp_path / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for d in range(40):
            text = f"{names[d % 12]} lies north of {names[(d * 5) % 12]}. Nobody goes there."
            out.write(json.dumps({"id": f"t{d}", "text": text}) + "\n")
    home = tmp_path / "prefect"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"},
        "PREFECT_HOME": str(home),
        "PTM_CACHE_DIR": str(tmp_path / "cache"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    }
    output = tmp_path / "linked.jsonl"
    command = [sys.executable, "-m", "flows.cli", "link", "--corpus", str(corpus)]
    command += ["--kg", str(kg), "--output", str(output), "--shard-size", "2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(output.read_text(encoding="utf-8").splitlines()) == 40
    for noise in ("Traceback", "CancelledError", "Error flushing"):
        assert noise not in done.stderr, done.stderr
