"""kill -9 / resume helpers shared by the run-folder tests (a uniquely named module, like
flow_settings: `conftest` is ambiguous when several test folders have one).

A user's own data (not the bundled samples) is generated here too: a corpus, a vocabulary
that covers it and a GLUE pair task, in words the samples do not use.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
WORDS = [
    "amber", "basalt", "cobalt", "dune", "ember", "fjord",
    "glacier", "heron", "iris", "juniper", "kelp", "lichen",
]  # fmt: skip
TIMING = ("tokens_per_s", "data_wait_share")


def own_vocab(path: Path) -> Path:
    """A WordPiece vocabulary of :data:`WORDS` (and the special tokens)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "meets", *WORDS]) + "\n"
    )
    return path


def own_corpus(path: Path, documents: int = 30, seed: int = 3) -> Path:
    """Documents of four sentences of :data:`WORDS`, separated by blank lines."""
    rng = random.Random(seed)
    texts = []
    for _ in range(documents):
        sentences = [" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) + "." for _ in range(4)]
        texts.append("\n".join(sentences))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(texts) + "\n")
    return path


def own_task(root: Path, rows: int = 24) -> list[str]:
    """A GLUE pair task (train/dev TSV) and its vocabulary; returns the finetune overrides."""
    rng = random.Random(7)
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        lines = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(rows):
            a, b = rng.sample(WORDS, 2)
            same = rng.random() < 0.5
            lines.append(f"{i}\tthe {a} meets the {b}\tthe {a if same else b}\t{int(same)}")
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return [
        "task=kg_pair",
        f"task.train={root / 'train.tsv'}",
        f"task.dev={root / 'dev.tsv'}",
        f"tokenizer={own_vocab(root / 'vocab.txt')}",
    ]


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a `ptm` subprocess: offline, its caches inside ``tmp_path``."""
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "PTM_CACHE_DIR": str(tmp_path / "cache"),
    }


def logged_steps(metrics: Path) -> int:
    """How many lines ``metrics.jsonl`` holds (0 before the first)."""
    return len(metrics.read_text().splitlines()) if metrics.is_file() else 0


def records(run: Path) -> list[dict]:
    """The metrics lines of a run without the timing keys (they differ between runs)."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING} for x in lines]


def same_final_weights(a: Path, b: Path) -> int:
    """Assert every tensor of every safetensors file under two ``final/`` folders is equal,
    bit for bit; returns how many tensors were compared."""
    files = sorted(p.relative_to(a) for p in a.rglob("*.safetensors"))
    assert files, f"no weights under {a}"
    assert files == sorted(p.relative_to(b) for p in b.rglob("*.safetensors"))
    compared = 0
    for file in files:
        x, y = load_file(a / file), load_file(b / file)
        assert x.keys() == y.keys(), file
        for name in x:
            assert torch.equal(x[name], y[name]), f"{file}: {name}"
            compared += 1
    return compared


def run_cli(args: Sequence[str], tmp_path: Path, timeout: float = 480) -> None:
    """Run ``python -m flows.cli ARGS`` to completion; fail with its stderr otherwise."""
    done = subprocess.run(
        [sys.executable, "-m", "flows.cli", *args],
        cwd=ROOT,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]


# Imports ptm once, then runs every attempt of the command in a forked child (the real
# `ptm` main) and kill -9s it: the kills cost the training they interrupt, not ~15 s of
# imports each on a loaded machine.
DRIVER = """
import json, os, signal, sys, time
from pathlib import Path
import torch  # noqa: F401  (imported, not used: no OpenMP pool exists before the forks)
import flows.cli, flows.finetune, flows.runner
for name in ("ptm_core.text_pretraining", "ptm_core.seq2seq_pretraining", "ptm_core.finetune.family"):
    __import__(name)

spec = json.loads(sys.argv[1])

def start(args):
    pid = os.fork()
    if pid == 0:
        os.setsid()  # its own group: the kill takes any worker process with it
        code = 1
        try:
            code = flows.cli.main(args)
        finally:
            os._exit(code)
    return pid

def lines(out):
    metrics = Path(out) / "metrics.jsonl"
    return len(metrics.read_text().splitlines()) if metrics.is_file() else 0

def finish(args):
    _, status = os.waitpid(start(args), 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ptm {' '.join(args)} failed: exit {os.waitstatus_to_exitcode(status)}")

finish(spec["straight"])
seen = []
for target in spec["kills"]:
    pid, started = start(spec["killed"]), time.monotonic()
    while True:
        if isinstance(target, float) and time.monotonic() - started >= target:
            break
        if isinstance(target, int) and lines(spec["out"]) >= target:
            break
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sys.exit(f"the run ended (status {status}) before the kill at {target}")
        if time.monotonic() - started > 300:
            sys.exit(f"no step {target} within 300 s")
        time.sleep(0.005)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    seen.append(lines(spec["out"]))
finish(spec["killed"])
print("SEEN " + json.dumps(seen), flush=True)
"""


def kill_9_at(
    args: Sequence[str], straight: Path, killed: Path, at_steps: Sequence[float], tmp_path: Path
) -> list[int]:
    """Run ``ptm ARGS`` into ``straight`` uninterrupted; then into ``killed``, ``kill -9``
    once per entry of ``at_steps`` and restart after each kill (the same command resumes):
    an int waits until ``metrics.jsonl`` holds that many lines, a float kills that many
    seconds after the start (start-up, data preparation). The last start runs to the end.

    Returns:
        The number of lines ``metrics.jsonl`` held at each kill.
    """
    spec = {
        "straight": [*args, f"trainer.output_dir={straight}"],
        "killed": [*args, f"trainer.output_dir={killed}"],
        "out": str(killed),
        "kills": list(at_steps),
    }
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(spec)],
        cwd=ROOT,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=3000,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("SEEN ")]
    return list(json.loads(line.removeprefix("SEEN ")))
