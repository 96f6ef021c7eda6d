"""Do StructBERT's structural objectives help? StructBERT-tiny vs the same model with MLM
alone, pre-trained on the gain suite's corpus for the same steps, fine-tuned on the gain
tasks (data_specs/gain_tasks).

    PTM_BENCH_DIR=/tmp/ptm-bench-structbert nice -n 10 \
        python -m benchmarks.structbert_gain --pretrain-steps 800 --seeds 0,1,2 --threads 1
    PTM_BENCH_DIR=/tmp/ptm-bench-structbert nice -n 10 python -m benchmarks.structbert_gain \
        --pretrain-steps 800 --paired --arms "StructBERT,MLM on the pairs" \
        --name structbert_gain_paired --threads 1

The corpus, the task budgets (:data:`benchmarks.finetune_gain.GAIN_BUDGETS`), the runner and
the table are the BERT gain suite's (``python -m benchmarks.finetune_gain --parts gain``).
Arms (:data:`ARMS`), same model (BERT 2 x 128), steps, batch, schedule and seed:
``ptm pretrain experiment=structbert_tiny`` (MLM + word-structural + sentence-structural,
segment pairs), ``... objective=mlm`` (MLM alone, RoBERTa's full single-segment rows) and
MLM alone on StructBERT's own pairs (the layout control); then every gain task fine-tuned
from each ``final/`` with the same budget and seeds. ``--paired`` pre-trains every arm once
per seed, so the spread includes pre-training's. Writes ``benchmarks/results/structbert_gain.{md,json}`` with
the command that made them.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    GAIN_TASKS,
    RESULTS,
    Runner,
    budget_overrides,
    gain_digest,
    headline,
    mean_std,
    table,
)
from benchmarks.gain_pretraining import pretrain_on_gain_corpus

EXPERIMENT = "structbert_tiny"
# arm label -> extra pre-training overrides
ARMS: dict[str, list[str]] = {
    "StructBERT": [],
    "MLM alone": ["objective=mlm"],
    # The layout control: StructBERT's own next/previous/random segment pairs, MLM loss only
    # (no shuffled trigrams; the sentence head is built but weighted 0).
    "MLM on the pairs": [
        "~objective.objectives.word_structural",
        "~objective.weights.word_structural",
        "objective.weights.sentence_structural=0",
    ],
}


def slug(label: str) -> str:
    return label.lower().replace(" ", "-")


def pretrain(label: str, steps: int, threads: int, seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """One arm's ``ptm pretrain experiment=structbert_tiny ...`` on the gain corpus; reused if done."""
    seed_tag = f"-seed{seed}" if seed else ""
    arm = [f"experiment={EXPERIMENT}", *ARMS[label], f"seed={seed}"]
    return pretrain_on_gain_corpus(
        f"{EXPERIMENT}-{slug(label)}{seed_tag}",
        [*arm, "trainer.log_every=50"],
        steps,
        threads,
        extra={"arm": label, "seed": seed, "arm_overrides": arm},
    )


def pretrain_line(record: dict[str, Any]) -> str:
    first, last = record["first_metrics"], record["last_metrics"]
    parts = [f"loss {first.get('loss', float('nan')):.2f} -> {last.get('loss', float('nan')):.2f}"]
    for key in (
        "mlm/accuracy",
        "word_structural/accuracy",
        "sentence_structural/accuracy",
    ):
        if key in last:
            parts.append(f"{key} {first.get(key, float('nan')):.3f} -> {last[key]:.3f}")
    return (
        f"- **{record['arm']}** (`{' '.join(record.get('arm_overrides', record['overrides']))}`): "
        f"{record['wall_s']:.0f} s; "
        + ", ".join(parts)
        + f" (step {first.get('step')} -> {last.get('step')})"
    )


def arm_runs(
    runner: Runner,
    task: str,
    label: str,
    seeds: list[int],
    finals: dict[int, dict[str, Path]],
    tag: str,
) -> dict[str, Any]:
    """``label``'s fine-tuning runs of ``task``, seed ``s`` from the ``final/`` of
    pre-training seed ``s`` (``finals[s]``, or ``finals[0]`` with one pre-training seed)."""
    budget = budget_overrides(dict(GAIN_BUDGETS[task]))
    print(f"{task} / {label}", flush=True)
    runs = []
    for seed in seeds:
        final = finals.get(seed, finals[0])[label]
        overrides = [f"task={task}", f"model={final}", *budget]
        runs.append(runner.run(f"{tag}/{task}/{slug(label)}", overrides, seed))
    return {
        "overrides": [f"task={task}", "model=<final/ of the arm>", *budget],
        **mean_std([r["headline"] for r in runs]),
        "wall_s": [r["wall_s"] for r in runs],
        "all_dev": [
            {k: v for k, v in r["final_metrics"].items() if k.startswith("dev/")} for r in runs
        ],
    }


def pairwise(task: str, first: str, second: str, arms: dict[str, Any]) -> dict[str, Any]:
    """A two-arm row of :func:`benchmarks.finetune_gain.table`: ``first`` - ``second`` per seed."""
    a, b = arms[first]["values"], arms[second]["values"]
    return {
        "task": task,
        "metric": headline(task),
        "budget": dict(GAIN_BUDGETS[task]),
        "arms": {first: arms[first], second: arms[second]},
        "gain": mean_std([x - y for x, y in zip(a, b, strict=True)]),
        "wins": sum(x > y for x, y in zip(a, b, strict=True)),
    }


def render(record: dict[str, Any]) -> str:
    corpus = record["pretrain"][0]["corpus"]
    steps = record["pretrain"][0]["steps"]
    paired = record.get("paired", False)
    seeds_text = (
        f"seeds {record['seeds']}, each arm pre-trained once per seed (pre-training seed = "
        "fine-tuning seed), so the spread includes pre-training's"
        if paired
        else f"fine-tuning seeds {record['seeds']} from one pre-training run per arm (seed 0)"
    )
    lines = [
        f"# StructBERT-tiny vs {' and vs '.join(record['tables'])} on the gain suite",
        "",
        f"`{record['command']}` ({record['machine']}). Every figure is the dev metric x 100, "
        f"mean ± std over {seeds_text}; *gain* is the per-seed difference of the two arms. "
        f"Every arm is the same BERT (2 x 128), pre-trained {steps} steps (batch 16, max "
        "length 128, peak lr 1e-3) on the generated gain corpus "
        f"({corpus['bytes'] / 1e6:.2f} MB, {corpus['documents']} documents), then fine-tuned "
        "with the same budget and seeds. *MLM alone* is `objective=mlm` (RoBERTa's full "
        "single-segment rows); *MLM on the pairs*, where run, is StructBERT's own "
        "next/previous/random segment pairs with the MLM loss only (no shuffled trigrams, "
        "sentence loss weighted 0): it separates the objectives from the data layout.",
        "",
        "Pre-training (first logged step -> last):",
        "",
        *[pretrain_line(r) for r in record["pretrain"]],
        "",
    ]
    for other, rows in record["tables"].items():
        lines += [f"## StructBERT vs {other}", "", table(rows, lambda row: ""), ""]
    if record.get("note"):
        lines += [record["note"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-steps", type=int, default=800)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tasks", default=",".join(GAIN_TASKS))
    parser.add_argument("--arms", default=",".join(ARMS), help="StructBERT and its ablations")
    parser.add_argument(
        "--paired",
        action="store_true",
        help="pre-train every arm once per seed (pre-training seed = fine-tuning seed)",
    )
    parser.add_argument(
        "--reuse", action="store_true", help="read finished fine-tuning runs' eval.json from disk"
    )
    parser.add_argument(
        "--name", default="structbert_gain", help="results file stem under benchmarks/results"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--note", default="", help="a paragraph written under the tables")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    tasks = [t for t in args.tasks.split(",") if t]
    labels = [a for a in args.arms.split(",") if a]
    unknown = sorted(set(tasks) - set(GAIN_TASKS))
    if unknown:
        parser.error(f"unknown tasks {unknown}; valid: {', '.join(GAIN_TASKS)}")
    if labels[:1] != ["StructBERT"] or len(labels) < 2 or set(labels) - set(ARMS):
        parser.error(f"--arms: StructBERT first, then one or more of {list(ARMS)[1:]}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    finals: dict[int, dict[str, Path]] = {}
    pre = []
    for seed in seeds if args.paired else [0]:
        for label in labels:
            final, record = pretrain(label, args.pretrain_steps, args.threads, seed)
            finals.setdefault(seed, {})[label] = final
            pre.append(record)
    tag = f"structbert-gain-{args.pretrain_steps}{'-paired' if args.paired else ''}-{gain_digest()}"
    runner = Runner(reuse=args.reuse)
    tables: dict[str, list[dict[str, Any]]] = {label: [] for label in labels[1:]}
    for task in tasks:
        arms = {label: arm_runs(runner, task, label, seeds, finals, tag) for label in labels}
        for other in labels[1:]:
            tables[other].append(pairwise(task, "StructBERT", other, arms))
    record = {
        "command": "python -m benchmarks.structbert_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "paired": args.paired,
        "pretrain": pre,
        "tables": tables,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / f"{args.name}.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
