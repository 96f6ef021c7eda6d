"""Does InfoWord's DIM term help? InfoWord-tiny (MLM + DIM) vs the same model trained with
MLM alone, same steps and seed, each fine-tuned on the gain tasks (data_specs/gain_tasks).

    python -m benchmarks.infoword_gain --pretrain-steps 800 --seeds 0,1,2 --threads 1
    python -m benchmarks.infoword_gain --pretrain-steps 800 --seeds 0,1,2 --paired --threads 1
    python -m benchmarks.infoword_gain --pretrain-steps 100 --seeds 0 --tasks gain_kind

The corpus, the task budgets (:data:`benchmarks.finetune_gain.GAIN_BUDGETS`) and the run
machinery are the BERT gain suite's (``python -m benchmarks.finetune_gain --parts gain``).
Both arms are ``ptm pretrain experiment=infoword_tiny`` on the generated corpus with the
suite's vocabulary (2 x 128 BERT, batch 16, peak lr 1e-3, seed 0); the ablation adds
``objective=mlm`` (the same MLM entry without the DIM term). Each task is then fine-tuned
from both ``final/`` folders with the same budget and seeds. ``--paired``: one pre-training
per arm and seed (``seed=k``), fine-tuning seed ``k`` starts from pre-training seed ``k``,
so the spread includes the pre-training's. Writes
``benchmarks/results/infoword_gain.{md,json}`` with the command that made them.
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
    budget_text,
    compare,
    gain_digest,
    headline,
    mean_std,
    table,
)
from benchmarks.gain_pretraining import pretrain_on_gain_corpus

EXPERIMENT = "infoword_tiny"
# Arm label -> extra pre-training overrides (the ablation swaps the objective group only).
ARMS: dict[str, list[str]] = {"infoword": [], "mlm alone": ["objective=mlm"]}


def arms_for(dim_weight: float) -> dict[str, list[str]]:
    """:data:`ARMS`, the InfoWord arm with ``λ_DIM = dim_weight`` (1 is the preset's)."""
    if dim_weight == 1.0:
        return dict(ARMS)
    return {**ARMS, "infoword": [f"objective.weights.infoword={dim_weight:g}"]}


def pretrain(
    label: str, steps: int, threads: int, seed: int = 0, arms: dict[str, list[str]] | None = None
) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=infoword_tiny <arm overrides> seed=<seed>`` on the gain
    corpus; reused if a finished run of the same arm, steps, seed and corpus exists."""
    extra = (arms or ARMS)[label]
    slug = label.replace(" ", "_") + (f"-seed{seed}" if seed else "")
    slug += "".join(
        "-" + o.partition("weights.")[2].replace("=", "") for o in extra if "weights" in o
    )
    arm = [f"experiment={EXPERIMENT}", *extra]
    return pretrain_on_gain_corpus(
        f"{EXPERIMENT}-{slug}",
        [*arm, f"seed={seed}", "trainer.log_every=50"],
        steps,
        threads,
        extra={"arm": label, "seed": seed, "arm_overrides": arm},
    )


def _loss_line(pre: dict[str, Any]) -> str:
    first, last = pre["first_metrics"], pre["last_metrics"]
    parts = [
        f"{key} {first.get(key, float('nan')):.3f} -> {last.get(key, float('nan')):.3f}"
        for key in ("mlm/loss", "mlm/accuracy", "infoword/loss", "infoword/accuracy")
        if key in last
    ]
    return (
        f"- {pre['arm']}: `{' '.join(pre['arm_overrides'])} seed={pre.get('seed', 0)}`, "
        f"{pre['wall_s']:.0f} s; " + ", ".join(parts)
    )


def render(record: dict[str, Any]) -> str:
    pres = record["pretrain"]
    corpus = pres[0]["corpus"]
    seeds_text = (
        "seed k pre-trains both arms with seed=k and fine-tunes them with seed=k"
        if record.get("paired")
        else "fine-tuning seeds, from one pre-training per arm with seed 0"
    )
    lines = [
        "# InfoWord-tiny on the gain suite: MLM + DIM vs MLM alone"
        + (f" (λ_DIM = {record['dim_weight']:g})" if record.get("dim_weight", 1.0) != 1.0 else ""),
        "",
        f"`{record['command']}` ({record['machine']}). Every figure is the dev metric x 100, "
        f"mean ± std over seeds {record['seeds']} ({seeds_text}); *gain* is the per-seed "
        "difference (InfoWord minus MLM alone). Both arms are the same 2 x 128 BERT, batch 16, "
        f"peak lr 1e-3, {pres[0]['steps']} pre-training steps on the generated corpus "
        f"({corpus['bytes'] / 1e6:.2f} MB, {corpus['documents']} documents); the ablation is "
        "`objective=mlm` (the same MLM entry, BERT's 15% and 80/10/10, without the DIM term). "
        "Fine-tuning budgets and seeds are the same for both arms.",
        "",
        "Pre-training (first logged step -> last):",
        "",
        *[_loss_line(pre) for pre in pres],
        "",
        table(record["rows"], lambda row: budget_text(row["budget"])),
        "",
    ]
    if record.get("note"):
        lines += [record["note"], ""]
    return "\n".join(lines)


def paired_row(
    runner: Runner,
    seeds: list[int],
    task: str,
    budget: dict[str, Any],
    finals: dict[tuple[str, int], Path],
    tag: str,
) -> dict[str, Any]:
    """One task, both arms, fine-tuning seed ``k`` from the arm's pre-training seed ``k``
    (the shape of :func:`benchmarks.finetune_gain.compare`'s rows)."""
    metric = headline(task)
    row: dict[str, Any] = {"task": task, "metric": metric, "arms": {}}
    for label in ARMS:
        runs = []
        for seed in seeds:
            overrides = [f"task={task}", f"model={finals[label, seed]}", *budget_overrides(budget)]
            name = f"{tag}/{task}/{label.replace(' ', '_')}-pre{seed}"
            runs.append(runner.run(name, overrides, seed))
        row["arms"][label] = {
            "overrides": [f"task={task}", "model=<the arm's final/ of seed k>"],
            **mean_std([r["headline"] for r in runs]),
            "wall_s": [r["wall_s"] for r in runs],
            "all_dev": [
                {k: v for k, v in r["final_metrics"].items() if k.startswith("dev/")} for r in runs
            ],
        }
    first, second = (row["arms"][label]["values"] for label in ARMS)
    row["gain"] = mean_std([a - b for a, b in zip(first, second, strict=True)])
    row["wins"] = sum(a > b for a, b in zip(first, second, strict=True))
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-steps", type=int, default=800)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tasks", default=",".join(GAIN_TASKS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--dim-weight",
        type=float,
        default=1.0,
        help="λ_DIM of the InfoWord arm; another value than 1 writes infoword_gain_dim<w> (0.1: dim0p1)",
    )
    parser.add_argument(
        "--paired", action="store_true", help="pre-train each arm once per seed (seed=k)"
    )
    parser.add_argument("--note", default="", help="a paragraph written under the table")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(GAIN_TASKS))
    if unknown:
        parser.error(f"unknown tasks {unknown}; valid: {', '.join(GAIN_TASKS)}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    pretrain_seeds = seeds if args.paired else [0]
    arms = arms_for(args.dim_weight)
    stem = "infoword_gain" + (
        f"_dim{args.dim_weight:g}".replace(".", "p") if args.dim_weight != 1.0 else ""
    )
    finals: dict[tuple[str, int], Path] = {}
    pres = []
    for seed in pretrain_seeds:
        for label in arms:
            finals[label, seed], pre = pretrain(
                label, args.pretrain_steps, args.threads, seed, arms
            )
            pres.append(pre)
    tag = f"{stem}-{args.pretrain_steps}-{gain_digest()}" + ("-paired" if args.paired else "")
    runner = Runner()
    rows = []
    for task in tasks:
        budget = dict(GAIN_BUDGETS[task])
        if args.paired:
            row = paired_row(runner, seeds, task, budget, finals, tag)
        else:
            arms = {
                label: (
                    f"{tag}/{task}/{label.replace(' ', '_')}",
                    [f"model={finals[label, 0]}", *budget_overrides(budget)],
                )
                for label in ARMS
            }
            row = compare(runner, seeds, task, arms)
        row["budget"] = budget
        rows.append(row)
    record = {
        "command": "python -m benchmarks.infoword_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "paired": args.paired,
        "dim_weight": args.dim_weight,
        "pretrain": pres,
        "rows": rows,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
