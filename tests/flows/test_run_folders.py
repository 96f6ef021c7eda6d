"""Run folders of `ptm finetune` and `ptm pretrain` on a user's own data (issue 31).

- two models never share a default fine-tuning folder, and a sweep over step budgets keeps
  each run's own metrics;
- a second model, tokenizer or seed into the same folder is refused with one line naming
  the differing keys, never resumed from the other run;
- Ctrl-C of `ptm pretrain` prints one line and exits 130; the same command resumes.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kill_resume import ROOT, cli_env, own_corpus, own_task, own_vocab
from terminal import sigint_as_in_a_terminal

from flows.cli import main
from flows.finetune import run_one, run_sweep

# Tiny, fast fine-tuning of a random-init preset.
QUICK = ["model.num_layers=1", "trainer.progress=false", "trainer.log_every=2"]


def _own_task(root: Path) -> list[str]:
    return [*own_task(root), *QUICK]


def test_two_models_never_share_a_default_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _own_task(tmp_path / "task")
    monkeypatch.chdir(tmp_path)
    tiny = run_one([*task, "model=bert_tiny", "trainer.max_steps=4"])
    mini = run_one([*task, "model=bert_mini", "trainer.max_steps=4"])
    assert tiny["output_dir"] != mini["output_dir"]
    assert Path(tiny["output_dir"]).parent.name.startswith("bert_tiny-")
    assert Path(mini["output_dir"]).parent.name.startswith("bert_mini-")
    assert Path(mini["output_dir"]).name == "seed0"
    # The same command again finds its own finished run.
    again = run_one([*task, "model=bert_tiny", "trainer.max_steps=4"])
    assert again["output_dir"] == tiny["output_dir"]
    assert again["final_metrics"] == tiny["final_metrics"]


def test_a_sweep_over_budgets_reports_each_run_its_own_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = _own_task(tmp_path / "task")
    monkeypatch.chdir(tmp_path)
    # The longer run first: a shared folder would hand its 6-step result to the 2-step run.
    sweep = run_sweep([*task, "trainer.max_steps=6,2"])
    steps = [run["final_metrics"]["step"] for run in sweep["runs"]]
    assert steps == [6, 2]
    assert len({run["output_dir"] for run in sweep["runs"]}) == 2


def test_another_model_tokenizer_or_seed_into_one_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = _own_task(tmp_path / "task")
    out = tmp_path / "shared"
    base = [*task, f"trainer.output_dir={out}", "trainer.max_steps=3"]
    assert main(["finetune", *base, "model=bert_tiny"]) == 0
    task_json = (out / "final" / "task.json").read_text() if (out / "final").is_dir() else ""
    capsys.readouterr()

    assert main(["finetune", *base, "model=bert_mini"]) == 1
    (err,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ptm: ")]
    assert "model.hidden_size 128 -> 256" in err and "trainer.resume=force" in err

    other_vocab = tmp_path / "vocab2.txt"
    other_vocab.write_text((tmp_path / "task" / "vocab.txt").read_text() + "zircon\n")
    assert main(["finetune", *base, "model=bert_tiny", f"tokenizer={other_vocab}"]) == 1
    err = capsys.readouterr().err
    assert "tokenizer" in err and "size mismatch" not in err

    assert main(["finetune", *base, "model=bert_tiny", "seed=4"]) == 1
    assert "seed 0 -> 4" in capsys.readouterr().err
    # Nothing of the first run was rewritten to claim another model.
    if task_json:
        assert (out / "final" / "task.json").read_text() == task_json

    # --overwrite starts afresh and keeps the old run aside.
    assert main(["finetune", "--overwrite", *base, "model=bert_mini"]) == 0
    assert len(list(out.glob("previous-run-*/checkpoints"))) == 1


PRETRAIN = [
    "experiment=bert_tiny",
    "model.num_layers=1",
    "model.hidden_size=32",
    "model.intermediate_size=64",
    "data.max_length=32",
    "data.batch_size=4",
    "trainer.progress=false",
    "trainer.log_every=1",
]


def _wait_for_steps(metrics: Path, process: subprocess.Popen[str], steps: int) -> None:
    deadline = time.monotonic() + 300
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= steps):
        assert process.poll() is None, "the run ended before the signal"
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)


@pytest.mark.integration
def test_pretrain_second_writer_seed_change_and_ctrl_c_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = own_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        *PRETRAIN,
        f"data.corpus={corpus}",
        f"data.tokenizer={own_vocab(tmp_path / 'vocab.txt')}",
        f"trainer.output_dir={out}",
        "trainer.save_every=5",
        "trainer.max_steps=3000",
    ]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=cli_env(tmp_path),
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    _wait_for_steps(out / "metrics.jsonl", process, 7)
    # A second `ptm pretrain` into the same folder meanwhile: refused, naming the holder.
    capsys.readouterr()
    assert main(command[3:]) == 1
    (refused,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("ptm: ")]
    assert f"being written by another ptm run (pid {process.pid})" in refused
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    (line,) = [x for x in err.splitlines() if x.startswith("ptm: ")]
    step, resume = map(int, re.findall(r"step (\d+)", line))
    assert line == f"ptm: interrupted at step {step}; the same command resumes from step {resume}"
    # The newest checkpoint on disk (every 5 steps): at a multiple of 5 the Ctrl-C may come
    # after the step and before its checkpoint is written, and the message says so.
    assert resume % 5 == 0 and 0 <= step - resume <= 5
    latest = (out / "checkpoints" / "latest").read_text().strip()
    assert latest == f"step-{resume:08d}"

    seed = subprocess.run(
        [*command[:-1], "trainer.max_steps=3000", "seed=7"],
        cwd=ROOT,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert seed.returncode == 1, seed.stderr[-3000:]
    (refusal,) = [x for x in seed.stderr.splitlines() if x.startswith("ptm: ")]
    assert "trainer.seed 0 -> 7" in refusal and "Traceback" not in seed.stderr
