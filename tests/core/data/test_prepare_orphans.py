"""A ``kill -9`` of a preparing process leaves none of its worker processes behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from ptm_core.tokenization import SPECIAL_TOKENS

_SCRIPT = """
import sys
from ptm_core.data.prepare import prepare_corpus
prepare_corpus([sys.argv[1]], sys.argv[2], tokenizer=sys.argv[3], workers=2,
               shard_bytes=4096, progress=False)
"""


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process tree of Linux")
def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    words = [f"zork{i}" for i in range(300)]
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
    corpus = tmp_path / "notes.txt"
    # ~4.6 MB in 1,000 distinct shards: the two workers are still busy when the parent dies.
    corpus.write_text(
        "\n\n".join(
            "\n".join(
                " ".join(words[(d * 13 + i * 7 + j) % 300] for j in range(40)) for i in range(16)
            )
            + f" doc{d}"
            for d in range(1000)
        )
        + "\n",
        encoding="utf-8",
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, str(corpus), str(tmp_path / "out"), str(vocab)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    children: list[psutil.Process] = []
    try:
        tree = psutil.Process(parent.pid)
        deadline = time.monotonic() + 120
        workers: list[psutil.Process] = []
        shards = tmp_path / "out" / "shards"
        # Kill once both workers are writing shards (their start-up is over).
        while time.monotonic() < deadline and parent.poll() is None:
            workers = [
                c for c in tree.children(recursive=True) if "spawn_main" in " ".join(c.cmdline())
            ]
            if len(workers) >= 2 and shards.is_dir() and len(list(shards.glob("*.json"))) >= 4:
                break
            time.sleep(0.2)
        assert parent.poll() is None, "the run ended before it could be killed: make it bigger"
        assert len(workers) >= 2
        children = tree.children(recursive=True)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_gone(c) for c in children):
            time.sleep(0.1)
        alive = [c.pid for c in children if not _gone(c)]
        assert not alive, f"processes alive 10 s after their parent's kill -9: {alive}"
    finally:
        if parent.poll() is None:
            parent.kill()
        for child in children:  # what the old code left running, so the session stays clean
            if not _gone(child):
                child.kill()
