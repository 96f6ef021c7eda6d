"""A few bad inputs through the real ``ptm`` command in a subprocess (slow: marked stress)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

zstandard = pytest.importorskip("zstandard")


def _ptm(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PREFECT_HOME": str(cwd / "prefect"),
        "PTM_CACHE_DIR": str(cwd / "cache"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    command = [sys.executable, "-m", "flows.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.stress
@pytest.mark.parametrize(
    "case", ["zst-cut", "deep-json", "surrogate", "fifo", "vocab-neg", "workers-neg", "dim-0"]
)
def test_cli_bad_input_is_one_line(case: str, tmp_path: Path) -> None:
    rows = "".join(json.dumps({"text": f"Vorix {i} hums."}) + "\n" for i in range(400))
    corpus = tmp_path / "in.jsonl"
    corpus.write_text(rows)
    args = ["prepare", str(corpus), "--output", str(tmp_path / "out"), "--workers", "0"]
    if case == "zst-cut":
        data = zstandard.ZstdCompressor().compress(rows.encode())
        corpus = tmp_path / "in.jsonl.zst"
        corpus.write_bytes(data[: len(data) // 2])
        args[1] = str(corpus)
    elif case == "deep-json":
        corpus.write_text(rows + '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    elif case == "surrogate":
        corpus.write_text(rows + '{"text": "a \\ud800 b"}\n')
    elif case == "fifo":
        os.mkfifo(tmp_path / "pipe.jsonl")
        args[1] = str(tmp_path / "pipe.jsonl")
    elif case == "vocab-neg":
        args += ["--vocab-size", "-5"]
    elif case == "workers-neg":
        args[-1] = "-3"
    elif case == "dim-0":
        args = ["embed-kg", "--kg", str(tmp_path), "--output", str(tmp_path / "out"), "--dim", "0"]
    result = _ptm(*args, cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("ptm: ")]
    assert len(lines) == 1, result.stderr[-2000:]
    assert not (tmp_path / "out" / "manifest.json").exists()
