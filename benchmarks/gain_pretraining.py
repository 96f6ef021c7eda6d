"""One ``ptm pretrain`` on the gain suite's generated corpus, reused while its ``final/``
exists: the pre-training step the gain benchmarks share (``modernbert_gain``,
``infoword_gain``, ``glm_gain``, ``structbert_gain``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import GAIN_DIR, WORK, gain_corpus, gain_digest, read_last_metrics
from benchmarks.fixtures import ROOT, bench_env


def first_metrics(out: Path) -> dict[str, float]:
    """The first training metrics line of a run (to show the loss falling)."""
    for path in sorted(out.glob("**/metrics.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                return {k: v for k, v in row.items() if isinstance(v, (int, float))}
    return {}


def pretrain_on_gain_corpus(
    name: str,
    overrides: Sequence[str],
    steps: int,
    threads: int,
    extra: dict[str, Any] | None = None,
    corpus: tuple[Path, dict[str, Any]] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain <overrides>`` for ``steps`` steps on the gain corpus with the suite's
    vocabulary, into ``WORK/pretrain-<name>-<steps>-<corpus digest>``.

    ``corpus`` (a file and its statistics) replaces the gain corpus (a labelled rendering
    of it, ``sentilr_gain``); its name should then be part of ``name``.

    Returns its ``final/`` and a record (``extra`` first, then the command's overrides,
    steps, corpus statistics, wall time, first and last logged metrics), also written as
    ``bench.json`` beside the run; a finished run with that file is reused.
    """
    corpus_path, stats = corpus if corpus is not None else gain_corpus()
    out = WORK / f"pretrain-{name}-{steps}-{gain_digest()}"
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        print(f"pretrain: reusing {final}", flush=True)
        return final, json.loads(record_path.read_text())
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        *overrides,
        f"data.corpus={corpus_path}",
        f"data.tokenizer={GAIN_DIR / 'vocab.txt'}",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    shutil.rmtree(out, ignore_errors=True)
    print(f"pretrain: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    env = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**env), check=True)
    record = {
        **(extra or {}),
        "overrides": command[4:],
        "steps": steps,
        "corpus": stats,
        "wall_s": time.perf_counter() - start,
        "first_metrics": first_metrics(out),
        "last_metrics": read_last_metrics(out),
        "final": str(final),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record
