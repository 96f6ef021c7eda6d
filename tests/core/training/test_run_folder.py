"""A run folder's identity and lock (issue 31, items 2, 6 and 14).

- a folder resumes only the run it holds: another seed, step budget or model shape is
  refused with one line naming the keys; ``resume=force`` resumes anyway, ``resume=false``
  moves the old run aside; folders written before fingerprints resume as before;
- one writer per folder: a second process is refused with the holder's pid, and a lock left
  by ``kill -9`` does not block the resume;
- Ctrl-C prints where training stopped and where the same command resumes.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from terminal import sigint_as_in_a_terminal

from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.run_folder import (
    FINGERPRINT_FILE,
    LOCK_FILE,
    RunLockedError,
    RunMismatchError,
    locked_run_folder,
    path_identity,
    run_identity,
)
from ptm_core.training.trainer import TIMING_KEYS, TrainingInterrupted

CONFTEST = Path(__file__).with_name("conftest.py")


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_resume_with_another_seed_is_refused_naming_the_key(
    make_model, make_source, make_config
) -> None:
    Trainer(make_model(0), make_source(), make_config("run", seed=1)).fit()
    with pytest.raises(RunMismatchError) as refused:
        Trainer(make_model(0), make_source(), make_config("run", seed=2)).fit()
    message = str(refused.value)
    assert "\n" not in message
    assert "trainer.seed 1 -> 2" in message
    assert "trainer.output_dir" in message and "trainer.resume=force" in message
    assert "trainer.resume=false" in message


def test_a_finished_run_of_another_budget_is_not_reported_as_this_one(
    make_model, make_source, make_config
) -> None:
    Trainer(make_model(0), make_source(), make_config("run", max_steps=20)).fit()
    with pytest.raises(RunMismatchError, match=r"trainer.max_steps 20 -> 10"):
        Trainer(make_model(0), make_source(), make_config("run", max_steps=10)).fit()


def test_another_model_shape_is_refused_before_any_state_dict_error(
    make_model, make_source, make_config
) -> None:
    Trainer(make_model(0, dim=16), make_source(), make_config("run")).fit()
    with pytest.raises(RunMismatchError, match=r"model\.architecture"):
        Trainer(make_model(0, dim=8), make_source(), make_config("run")).fit()


def test_identity_keys_of_the_composed_run_are_compared(
    make_model, make_source, make_config, tmp_path: Path
) -> None:
    data = tmp_path / "corpus.txt"
    data.write_text("first version of the user's corpus\n")
    with run_identity({"data.corpus": path_identity(data)}):
        Trainer(make_model(0), make_source(), make_config("run", max_steps=10)).fit()
    data.write_text("second version, edited in place\n")
    with (
        run_identity({"data.corpus": path_identity(data)}),
        pytest.raises(RunMismatchError, match=r"data\.corpus"),
    ):
        Trainer(make_model(0), make_source(), make_config("run", max_steps=10)).fit()


def test_same_settings_resume_bit_identically(make_model, make_source, make_config) -> None:
    straight_model = make_model(0)
    Trainer(straight_model, make_source(), make_config("a")).fit()
    first = make_model(0)
    Trainer(first, make_source(), make_config("b", max_steps=20, save_every=10)).fit()
    # The same command again: a finished run resumes (nothing to do), no refusal.
    again = make_model(0)
    result = Trainer(again, make_source(), make_config("b", max_steps=20, save_every=10)).fit()
    assert result.final_step == 20
    for name, value in _weights(straight_model).items():
        assert torch.equal(value, _weights(again)[name]), name


def test_force_resumes_and_false_moves_the_old_run_aside(
    make_model, make_source, make_config
) -> None:
    Trainer(make_model(0), make_source(), make_config("run", max_steps=10)).fit()
    forced = Trainer(make_model(0), make_source(), make_config("run", max_steps=20, resume="force"))
    assert forced.fit().final_step == 20
    recorded = json.loads((forced.output_dir / FINGERPRINT_FILE).read_text())
    assert recorded["keys"]["trainer.max_steps"] == 20
    fresh = Trainer(make_model(0), make_source(), make_config("run", seed=5, resume=False))
    assert fresh.fit().final_step == 20
    (archive,) = fresh.output_dir.glob("previous-run-*")
    assert (archive / "checkpoints").is_dir() and (archive / FINGERPRINT_FILE).is_file()


def test_folder_without_fingerprint_resumes_as_before_and_says_so(
    make_model, make_source, make_config, caplog: pytest.LogCaptureFixture
) -> None:
    first = Trainer(make_model(0), make_source(), make_config("run", max_steps=20))
    first.fit()
    (first.output_dir / FINGERPRINT_FILE).unlink()
    with caplog.at_level(logging.WARNING, logger="ptm_core"):
        result = Trainer(make_model(0), make_source(), make_config("run", seed=9)).fit()
    assert result.final_step == 20
    assert f"has no {FINGERPRINT_FILE}" in caplog.text
    assert (first.output_dir / FINGERPRINT_FILE).is_file()  # recorded from now on


def test_resume_value_is_validated(make_config) -> None:
    with pytest.raises(ValueError, match="resume must be true, false or force"):
        make_config(resume="always")


def test_an_existing_file_as_output_dir_is_named(make_model, make_source, make_config) -> None:
    config = make_config("file")
    Path(config.output_dir).write_text("mine")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        Trainer(make_model(0), make_source(), config).fit()
    assert Path(config.output_dir).read_text() == "mine"


def test_a_file_above_the_output_dir_is_named_not_a_traceback(tmp_path: Path) -> None:
    # trainer.output_dir=notes.txt/run: mkdir raised NotADirectoryError, which the CLI does
    # not catch as a user error.
    (tmp_path / "notes.txt").write_text("mine")
    refused = pytest.raises(ValueError, match=r"notes\.txt is a file, not a folder")
    with refused, locked_run_folder(tmp_path / "notes.txt" / "run"):
        pass
    assert (tmp_path / "notes.txt").read_text() == "mine"


HOLD = textwrap.dedent(
    """
    import sys, time
    from ptm_core.training.run_folder import locked_run_folder
    with locked_run_folder(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
    """
)


def test_second_writer_is_refused_with_the_pid_and_a_kill_9_frees_the_folder(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(RunLockedError, match=rf"another ptm run \(pid {holder.pid}\)"),
            locked_run_folder(folder),
        ):
            pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kernel dropped the dead holder's lock; the lock is re-entrant in one process.
    with locked_run_folder(folder), locked_run_folder(folder):
        pass


# Trains the toy model of conftest.py (argv: folder, conftest, max_steps, seconds per batch).
SLOW_RUN = textwrap.dedent(
    """
    import importlib.util, sys, time
    from safetensors.torch import save_model
    from ptm_core.training.run import train_and_save
    spec = importlib.util.spec_from_file_location("toy", sys.argv[2])
    toy = sys.modules["toy"] = importlib.util.module_from_spec(spec); spec.loader.exec_module(toy)
    from ptm_core.training import TrainerConfig

    class Slow(toy.ToySource):
        def iter_batches(self, epoch, start=0):
            for batch in super().iter_batches(epoch, start):
                time.sleep(float(sys.argv[4]))
                yield batch

    import torch
    torch.manual_seed(0)
    model = toy.ToyModel()
    config = TrainerConfig(output_dir=sys.argv[1], max_steps=int(sys.argv[3]), save_every=5,
                           log_every=1, progress=False, device="cpu", learning_rate=1e-2)
    def save(path):
        path.mkdir(parents=True, exist_ok=True)
        save_model(model, str(path / "model.safetensors"))
    train_and_save(model, Slow(), config, save_final=save)
    """
)


def _start(script: Path, out: Path, steps: int, pause: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(script), str(out), str(CONFTEST), str(steps), str(pause)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lines(out: Path, process: subprocess.Popen[str], lines: int) -> None:
    metrics, deadline = out / "metrics.jsonl", time.monotonic() + 120
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= lines):
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.02)


def _records(out: Path) -> list[dict[str, object]]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING_KEYS} for x in lines]


def test_kill_9_frees_the_folder_and_the_resume_is_bit_identical(
    tmp_path: Path, make_model: Callable[..., Any], make_source: Callable[..., Any]
) -> None:
    script = tmp_path / "run.py"
    script.write_text(SLOW_RUN)
    straight = _start(script, tmp_path / "straight", 30, 0.0)
    assert straight.wait(timeout=300) == 0, straight.communicate()[1][-2000:]
    out = tmp_path / "killed"
    victim = _start(script, out, 30, 0.3)  # slow: it is still running at the checks below
    _wait_for_lines(out, victim, 12)
    # A second writer while the first runs: refused, naming the holder.
    with pytest.raises(RunLockedError, match=rf"pid {victim.pid}\)"):
        config = TrainerConfig(output_dir=str(out), device="cpu")
        Trainer(make_model(), make_source(), config).fit()
    victim.kill()  # SIGKILL: the lock file stays, the kernel's lock does not
    victim.communicate()
    assert (out / LOCK_FILE).read_text().strip() == str(victim.pid)
    assert not (out / "final").exists()
    resumed = _start(script, out, 30, 0.0)
    assert resumed.wait(timeout=300) == 0, resumed.communicate()[1][-2000:]
    assert _records(out) == _records(tmp_path / "straight")
    a = load_file(tmp_path / "straight" / "final" / "model.safetensors")
    b = load_file(out / "final" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_ctrl_c_prints_one_line_with_the_resume_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    script = tmp_path / "run.py"
    script.write_text(SLOW_RUN)
    runner = tmp_path / "cli_like.py"
    runner.write_text(
        textwrap.dedent(
            f"""
            import runpy, sys
            try:
                runpy.run_path({str(script)!r}, run_name="__main__")
            except KeyboardInterrupt as exc:
                print(f"ptm: {{exc}}", file=sys.stderr)
                sys.exit(130)
            """
        )
    )
    process = subprocess.Popen(
        [sys.executable, str(runner), str(out), str(CONFTEST), "400", "0.05"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    deadline = time.monotonic() + 120
    metrics = out / "metrics.jsonl"
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) >= 7):
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "training did not start"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err[-2000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err[-2000:]
    (last,) = [line for line in lines if "interrupted" in line]
    step, resume = map(int, re.findall(r"step (\d+)", last))
    assert step >= 7 and resume == step - step % 5 and resume > 0
    assert last == f"ptm: interrupted at step {step}; the same command resumes from step {resume}"


def test_training_interrupted_is_a_keyboard_interrupt() -> None:
    error = TrainingInterrupted(12, 10)
    assert isinstance(error, KeyboardInterrupt)
    assert str(error) == "interrupted at step 12; the same command resumes from step 10"


def test_path_identity_follows_content_not_place_nor_derived_caches(tmp_path: Path) -> None:
    model = tmp_path / "a" / "final"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 48}')
    (model / "model.safetensors").write_bytes(b"\x00" * 100)
    copy = tmp_path / "b" / "final"
    copy.mkdir(parents=True)
    for file in model.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    assert path_identity(model) == path_identity(copy)
    (copy / ".model.safetensors.x1.tmp").write_bytes(b"half")  # an atomic write in flight
    (copy / "cache").mkdir()
    (copy / "cache" / "plan.npy").write_bytes(b"derived")
    assert path_identity(model) == path_identity(copy)
    (copy / "model.safetensors").write_bytes(b"\x01" * 100)
    assert path_identity(model) != path_identity(copy)
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    manifest = {"format": "ptm-prepared/1", "fingerprint": "ab" * 32}
    (prepared / "manifest.json").write_text(json.dumps(manifest))
    assert path_identity(prepared) == "prepared:" + "ab" * 8


def test_folder_identity_follows_weights_not_metrics_json(tmp_path: Path) -> None:
    """A re-made folder with the same weights but other timings is the same input."""
    from ptm_core.training.run_folder import path_identity

    folder = tmp_path / "kg"
    folder.mkdir()
    (folder / "entity_embeddings.safetensors").write_bytes(b"weights")
    (folder / "metrics.json").write_text('{"seconds": 9.1}')
    before = path_identity(folder)
    (folder / "metrics.json").write_text('{"seconds": 9.4}')
    assert path_identity(folder) == before
    (folder / "entity_embeddings.safetensors").write_bytes(b"weights2")
    assert path_identity(folder) != before
