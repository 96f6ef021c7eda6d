"""What the gain benchmarks that compare pre-training arms share (``modernbert_gain``,
``infoword_gain``, ``glm_gain``, ``structbert_gain``, ``sentilr_gain``): one ``ptm pretrain``
on the gain suite's generated corpus, reused while its ``final/`` exists
(:func:`pretrain_on_gain_corpus`); the rows that fine-tune each arm's ``final/`` on each
gain task with its budget, one pre-training for all seeds or one per seed
(:func:`arm_rows`); and the results files (:func:`write_results`)."""

from __future__ import annotations

import json
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    GAIN_DIR,
    RESULTS,
    WORK,
    Runner,
    add_gain,
    arm_cell,
    budget_overrides,
    compare,
    gain_corpus,
    gain_digest,
    headline,
    read_last_metrics,
)
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


def underscored(label: str) -> str:
    """An arm's label in a run folder name: spaces become underscores."""
    return label.replace(" ", "_")


def arm_rows(
    runner: Runner,
    seeds: Sequence[int],
    tasks: Sequence[str],
    finals: Mapping[tuple[str, int], Path],
    tag: str,
    *,
    paired: bool = False,
    slug: Callable[[str], str] = underscored,
) -> list[dict[str, Any]]:
    """Each of ``tasks``: every arm's ``final/`` fine-tuned over ``seeds`` with the task's
    gain budget (:data:`~benchmarks.finetune_gain.GAIN_BUDGETS`), one row per task in the
    shape of :func:`~benchmarks.finetune_gain.compare` (with two arms: ``gain``, the first
    minus the second, and ``wins``), plus its ``budget``.

    ``finals`` maps ``(arm label, pre-training seed)`` to the arm's ``final/``, the arms in
    their order. Unpaired, every fine-tuning seed starts from pre-training seed 0, in
    ``<tag>/<task>/<slug(label)>``; ``paired``, fine-tuning seed ``k`` starts from
    pre-training seed ``k`` (the spread includes the pre-training's), in
    ``<tag>/<task>/<slug(label)>-pre<k>``.
    """
    labels = list(dict.fromkeys(label for label, _ in finals))
    rows = []
    for task in tasks:
        budget = dict(GAIN_BUDGETS[task])
        if paired:
            row: dict[str, Any] = {"task": task, "metric": headline(task), "arms": {}}
            for label in labels:
                runs = [
                    (
                        f"{tag}/{task}/{slug(label)}-pre{seed}",
                        [f"model={finals[label, seed]}", *budget_overrides(budget)],
                        seed,
                    )
                    for seed in seeds
                ]
                recorded = [f"task={task}", "model=<the arm's final/ of seed k>"]
                row["arms"][label] = arm_cell(runner, task, runs, recorded)
            add_gain(row)
        else:
            arms = {
                label: (
                    f"{tag}/{task}/{slug(label)}",
                    [f"model={finals[label, 0]}", *budget_overrides(budget)],
                )
                for label in labels
            }
            row = compare(runner, seeds, task, arms)
        row["budget"] = budget
        rows.append(row)
    return rows


def write_results(
    module: str,
    argv: Sequence[str] | None,
    threads: int,
    seeds: Sequence[int],
    stem: str,
    render: Callable[[dict[str, Any]], str],
    **fields: Any,
) -> dict[str, Any]:
    """The record of a run of ``python -m benchmarks.<module>`` (the command, the machine,
    the seeds, then ``fields``), written to ``benchmarks/results/<stem>.json`` and, rendered,
    ``<stem>.md``; the rendering is printed. Returns the record."""
    record = {
        "command": f"python -m benchmarks.{module} "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {threads or 'default'} thread(s)",
        "seeds": list(seeds),
        **fields,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(record))
    print(render(record))
    return record
