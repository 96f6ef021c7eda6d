"""Run a test's worker script in several CPU processes under torchrun (Gloo)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_torchrun(worker: Path, *args: str, nproc: int = 2, timeout: int = 300) -> None:
    """``python -m torch.distributed.run --standalone --nproc-per-node=nproc worker args``;
    fails the test with the end of stderr when any process fails."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            str(worker),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, (
        f"{worker.name} under torchrun exited {result.returncode}:\n{result.stderr[-4000:]}"
    )
