"""Every README and docs block marked runnable runs, as written, on the bundled samples.

The documents: ``README.md``, ``packages/*/README.md`` and every page under ``docs/``. The
convention (also in ``docs/development.md``): the line right before a fenced ``bash`` or
``python`` block is

- ``<!-- runnable -->``: the block runs in ``make test``;
- ``<!-- runnable slow -->``: the block takes minutes (pre-training presets, Inductor
  compilation); it runs under the ``readme_slow`` marker, with ``make test-readme-slow``
  (see ``tests/docs/conftest.py``).

Unmarked blocks are not run: they need a GPU, the network, a server or data a user
brings (``/data/wiki``), or they are the set-up commands themselves (``make demo``).

How a block runs, so that nothing in the working tree is written:

- in a fresh temporary directory holding copies of ``configs/`` and ``data_specs/``
  (relative paths such as ``data_specs/knowledge_graph/sample`` resolve there, and
  ``runs/`` is written there);
- with the Makefile's exported settings (offline, no telemetry, every cache in the
  temporary directory), read from the Makefile itself so the two cannot drift;
- Python blocks with this interpreter, in a subprocess; a failure names the README file
  and line, and the traceback's lines are README lines;
- bash blocks with ``bash -euo pipefail``, with this environment's ``bin/`` on PATH (so
  ``ptm`` and ``python`` are the installed ones) and, before it, a tiny ``uv`` shim:
  ``uv run [--frozen ...] CMD ARGS`` executes ``CMD ARGS`` in this environment. The README
  writes ``uv run ptm ...`` for users of the uv checkout; the shim tests exactly that text
  without syncing another environment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READMES = [
    REPO / "README.md",
    *sorted((REPO / "packages").glob("*/README.md")),
    *sorted((REPO / "docs").rglob("*.md")),
]
MARKER = re.compile(r"^<!--\s*runnable(?:\s+(?P<speed>\S+))?\s*-->\s*$")
FENCE = re.compile(r"^```(?P<info>\S*)\s*$")
LANGUAGES = ("bash", "python")
TIMEOUT_S = {"": 300, "slow": 1800}
UV_SHIM = """#!/usr/bin/env bash
# README test shim (tests/docs/test_readme_blocks.py): `uv run [--flags] CMD ARGS` runs
# CMD ARGS in the test's environment, whose bin/ is on PATH.
if [ "${1:-}" != run ]; then
    echo "uv shim (tests/docs): only 'uv run' is supported here, got: uv $*" >&2
    exit 2
fi
shift
while [ $# -gt 0 ] && [[ $1 == --* ]]; do shift; done
exec "$@"
"""


@dataclass(frozen=True)
class Block:
    """A fenced code block of a README: where it is, its language, marker and text."""

    readme: Path
    line: int  # 1-based line of the opening fence
    language: str
    speed: str | None  # None = unmarked, "" = runnable, "slow" = runnable slow
    text: str

    @property
    def where(self) -> str:
        return f"{self.readme.relative_to(REPO)}:{self.line}"


def read_blocks(readme: Path) -> list[Block]:
    """Every fenced block of ``readme``, with the runnable marker of the line before it."""
    lines = readme.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{readme}:{index + 1}: this code fence is never closed")
        marker = MARKER.match(lines[index - 1]) if index else None
        blocks.append(
            Block(
                readme=readme,
                line=index + 1,
                language=opening["info"],
                speed=None if marker is None else (marker["speed"] or ""),
                text="\n".join(lines[index + 1 : end]) + "\n",
            )
        )
        index = end + 1
    return blocks


ALL_BLOCKS = [block for readme in READMES for block in read_blocks(readme)]
RUNNABLE = [block for block in ALL_BLOCKS if block.speed is not None]


def _makefile_environment(root: Path) -> dict[str, str]:
    """The Makefile's ``export NAME := value`` settings, ``$(CURDIR)`` = ``root``."""
    settings = {}
    for line in (REPO / "Makefile").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^export\s+(\w+)\s*:?=\s*(.*?)\s*$", line)
        if match:
            settings[match[1]] = match[2].replace("$(CURDIR)", str(root))
    return settings


def _workspace(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch checkout-like folder and the environment a block runs with."""
    work = tmp_path / "work"
    work.mkdir(parents=True)
    for folder in ("configs", "data_specs"):
        shutil.copytree(REPO / folder, work / folder, symlinks=True)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "uv").write_text(UV_SHIM, encoding="utf-8")
    (shim / "uv").chmod(0o755)

    env = dict(os.environ)
    env.update(_makefile_environment(work))
    for name in ("PREFECT_HOME", "PREFECT_LOCAL_STORAGE_PATH", "HF_HOME", "PYSTOW_HOME"):
        Path(env[name]).mkdir(parents=True, exist_ok=True)
    env["PTM_CONFIG_DIR"] = str(work / "configs")
    env["MPLBACKEND"] = "Agg"
    env.pop("PREFECT_API_URL", None)  # each `ptm` command starts its own temporary server
    bin_dir = Path(sys.executable).parent
    env["PATH"] = os.pathsep.join([str(shim), str(bin_dir), env.get("PATH", "")])
    return work, env


def _readme_traceback(output: str, script: Path, block: Block) -> str:
    """Rewrite ``File ".../block.py", line N`` into the README's own file and line."""
    pattern = re.compile(rf'File "{re.escape(str(script))}", line (\d+)')
    readme = str(block.readme.relative_to(REPO))
    return pattern.sub(lambda m: f'File "{readme}", line {block.line + int(m[1])}', output)


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _params() -> list[object]:
    params = []
    for block in RUNNABLE:
        marks = [pytest.mark.readme_slow] if block.speed == "slow" else []
        params.append(pytest.param(block, id=block.where, marks=marks))
    return params


def run_block(block: Block, tmp_path: Path) -> tuple[int, str]:
    """Run ``block`` alone in a scratch folder; its exit code and output (README lines)."""
    work, env = _workspace(tmp_path)
    if block.language == "python":
        script = tmp_path / "block.py"
        command = [sys.executable, str(script)]
    else:
        script = tmp_path / "block.sh"
        command = ["bash", "-euo", "pipefail", str(script)]
    script.write_text(block.text, encoding="utf-8")
    try:
        result = subprocess.run(
            command,
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S[block.speed or ""],
        )
    except subprocess.TimeoutExpired as error:
        return -1, f"{block.where}: the {block.language} block ran past {error.timeout} s"
    return result.returncode, _readme_traceback(result.stdout + result.stderr, script, block)


@pytest.mark.parametrize("block", _params())
def test_readme_block_runs(block: Block, tmp_path: Path) -> None:
    returncode, output = run_block(block, tmp_path)
    assert returncode == 0, (
        f"{block.where}: the {block.language} block exited with {returncode}:\n{_tail(output)}"
    )


def test_a_failing_block_is_reported_at_its_readme_line(tmp_path: Path) -> None:
    """The harness itself: a block that fails is caught, with the README's file and line."""
    python = Block(REPO / "README.md", 40, "python", "", "x = 1\nundefined_name\n")
    returncode, output = run_block(python, tmp_path / "python")
    assert returncode == 1
    assert 'File "README.md", line 42' in output  # fence at 40, the block's 2nd line
    assert "NameError: name 'undefined_name' is not defined" in output

    bash = Block(REPO / "README.md", 50, "bash", "", "false | cat\necho not reached\n")
    returncode, output = run_block(bash, tmp_path / "bash")
    assert returncode == 1  # pipefail + errexit
    assert "not reached" not in output


def test_uv_run_executes_the_command_in_this_environment(tmp_path: Path) -> None:
    """The shim: ``uv run --frozen python`` is this interpreter; other uv commands fail."""
    text = 'uv run --frozen python -c "import sys; print(sys.prefix)"\n'
    returncode, output = run_block(Block(REPO / "README.md", 1, "bash", "", text), tmp_path / "a")
    assert returncode == 0, output
    assert output.strip() == sys.prefix
    returncode, output = run_block(
        Block(REPO / "README.md", 1, "bash", "", "uv sync\n"), tmp_path / "b"
    )
    assert returncode == 2
    assert "only 'uv run' is supported" in output


def test_markers_sit_on_bash_or_python_blocks() -> None:
    """A marker is known, and the block after it is a bash or python block."""
    problems = []
    for readme in READMES:
        lines = readme.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            marker = MARKER.match(line)
            if marker is None:
                if "runnable" in line and line.lstrip().startswith("<!--"):
                    problems.append(f"{readme.name}:{number}: malformed marker {line!r}")
                continue
            if (marker["speed"] or "") not in TIMEOUT_S:
                problems.append(
                    f"{readme.relative_to(REPO)}:{number}: unknown marker {line!r}; "
                    "use <!-- runnable --> or <!-- runnable slow -->"
                )
            following = FENCE.match(lines[number]) if number < len(lines) else None
            if following is None or following["info"] not in LANGUAGES:
                problems.append(
                    f"{readme.relative_to(REPO)}:{number}: the marker must sit on the line "
                    "right before a ```bash or ```python fence"
                )
    assert not problems, "\n".join(problems)


def test_most_readme_code_is_runnable() -> None:
    """The READMEs keep a real share of runnable blocks (it must not decay to zero)."""
    code = [block for block in ALL_BLOCKS if block.language in LANGUAGES]
    assert len(RUNNABLE) >= len(code) // 2, (
        f"only {len(RUNNABLE)} of {len(code)} bash/python blocks are marked runnable"
    )
