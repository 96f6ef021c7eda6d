"""`ptm finetune` as a user sees it: a bar on a terminal, periodic lines in a log, an end table."""

from __future__ import annotations

import errno
import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = ["task=kg_pair", "model.num_layers=1", "trainer.max_steps=12", "trainer.log_every=4"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PTM_PROGRESS")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_HOME=str(tmp_path / "prefect"),
        **extra,
    )
    return env


def _finetune_argv(output: Path) -> list[str]:
    return [sys.executable, "-m", "flows.cli", "finetune", *TINY, f"trainer.output_dir={output}"]


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError as exc:  # Linux: EIO once the child closed the terminal
            if exc.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _end_table(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").splitlines()
    start = max(i for i, line in enumerate(lines) if line.startswith("finetune kg_pair"))
    return lines[start:]


@pytest.mark.integration
def test_finetune_on_a_terminal_draws_a_bar_and_ends_with_a_metrics_table(
    tmp_path: Path,
) -> None:
    controller, terminal = os.openpty()
    # A 120-column window: tqdm sizes the bar to it (a fresh pty reports 0 x 0).
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    process = subprocess.Popen(
        _finetune_argv(tmp_path / "run"),
        cwd=REPO,
        env=_env(tmp_path),
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        close_fds=True,
    )
    os.close(terminal)
    try:
        output = _read_all(controller).decode("utf-8", "replace")
    finally:
        os.close(controller)
        code = process.wait(timeout=600)
    assert code == 0, output[-3000:]
    # The bar: redrawn in place with carriage returns, with the count, the rate and an ETA
    # (tqdm's `[elapsed<remaining, rate]`).
    redraws = re.findall(
        r"\rtrain:[^\r\n]*\d+/12 \[[0-9:]+<[0-9:?]+, *[0-9.?]+ ?(?:step/s|s/step)", output
    )
    assert len(redraws) >= 2, output[-3000:]
    assert "\rtrain: 100%" in output
    # The trainer's step lines still print, above the bar (logging goes through tqdm).
    assert re.search(r"step 12/12: epoch [0-9.]+, loss [0-9.]+, lr ", output)
    table = _end_table(output)
    assert re.fullmatch(r"  metric +value", table[1])
    assert re.fullmatch(r"  dev/accuracy +[01]\.\d{4}", table[2])
    assert any(
        re.fullmatch(rf"  final model +{re.escape(str(tmp_path / 'run' / 'final'))}", line)
        for line in table
    )


@pytest.mark.integration
def test_finetune_in_a_log_writes_plain_periodic_lines_instead_of_a_bar(tmp_path: Path) -> None:
    completed = subprocess.run(
        _finetune_argv(tmp_path / "run"),
        cwd=REPO,
        env=_env(tmp_path, PTM_PROGRESS_SECONDS="0"),  # a line at every step
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    err = completed.stderr
    assert "\r" not in err  # no bar when stderr is a pipe
    lines = re.findall(
        r"train: (\d+)/12 steps \(\d+%\), [0-9.]+ (?:steps/s|s/step), ETA \d+:\d\d:\d\d", err
    )
    assert [int(n) for n in lines] == list(range(1, 13))
    assert re.search(r"train: 12/12 steps \(100%\), [^,]+, done in \d+:\d\d:\d\d", err)
    # Fine-tuning logs its step lines as pre-training does.
    assert len(re.findall(r"ptm_core\.training\.trainer\W+step \d+/12: epoch", err)) == 3
    table = _end_table(completed.stdout)
    assert any(line.split()[:1] == ["dev/accuracy"] for line in table)
    assert any(line.split()[:2] == ["final", "model"] for line in table)


def test_a_bad_progress_setting_fails_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.cli import main

    monkeypatch.setenv("PTM_PROGRESS_SECONDS", "often")
    assert main(["finetune", *TINY]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ptm: PTM_PROGRESS_SECONDS='often' is not a number of seconds")
