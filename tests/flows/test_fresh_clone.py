"""`make demo` on a fresh clone, with the Makefile's own environment.

The other tests set their own PREFECT_HOME and caches, so they cannot see a Makefile that
is broken for a new user (once, every fresh clone's demo failed because the Makefile
pointed PREFECT_HOME at a `.cache/` folder that did not exist). This test clones HEAD into
a temporary directory and runs the Makefile's `demo` target there: the same variables, the
same folders, the same command line, only with this venv's `ptm` instead of `uv run`
(`SETUP=` skips the environment sync) and fewer training steps.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_SOURCES = ("core", "knowledge", "multilingual", "multimodal")


def _clean_environment() -> dict[str, str]:
    # What a new user's shell has: none of the settings that the test suite or the
    # Makefile export, so only the clone's Makefile can provide them.
    dropped = ("PREFECT_", "PTM_", "HF_", "PYSTOW_", "DASK_", "TRANSFORMERS_", "MAKE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.pop("DO_NOT_TRACK", None)
    env.pop("MFLAGS", None)
    return env


@pytest.mark.integration
@pytest.mark.slow
def test_make_demo_runs_on_a_fresh_clone(tmp_path: Path) -> None:
    if shutil.which("make") is None or shutil.which("git") is None:
        pytest.fail("make and git are needed: the README's first command is `make demo`")
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: there is no HEAD to clone")
    clone = tmp_path / "ptm"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    assert not (clone / ".cache").exists()  # what a new user starts from

    # The clone's own code first: the editable installs in this venv point at REPO.
    python_path = os.pathsep.join(
        [str(clone), *(str(clone / "packages" / p / "src") for p in PACKAGE_SOURCES)]
    )
    # RUN prefixes the `ptm` command: this venv's bin/ holds the `ptm` script.
    bin_dir = Path(sys.executable).parent
    run = f"env PYTHONPATH={shlex.quote(python_path)} PATH={shlex.quote(str(bin_dir))}:$$PATH"
    command = [
        "make",
        "--no-print-directory",
        "demo",
        "SETUP=",
        f"RUN={run}",
        "DEMO_ARGS=trainer.max_steps=3 trainer.log_every=1",
    ]
    result = subprocess.run(
        command, cwd=clone, env=_clean_environment(), capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    # `make demo` again: the demo replaces only what it wrote (its KG embeddings carry ptm's
    # marker) and its finished pre-training resumes (same fingerprint), so it succeeds.
    again = subprocess.run(
        command, cwd=clone, env=_clean_environment(), capture_output=True, text=True, timeout=600
    )
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    report = clone / "runs" / "demo" / "report.md"
    assert report.is_file(), output[-4000:]
    assert "## Knowledge graph" in report.read_text(encoding="utf-8")
    # The Makefile's folders were used, inside the clone.
    assert (clone / ".cache" / "prefect").is_dir()
    assert re.search(rf"^report:\s+{re.escape(str(report))}$", output, re.M), output[-4000:]
