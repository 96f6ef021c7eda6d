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
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import GAIN_TASKS, Runner, budget_text, gain_digest, table
from benchmarks.gain_pretraining import arm_rows, pretrain_on_gain_corpus, write_results

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
    rows = arm_rows(Runner(), seeds, tasks, finals, tag, paired=args.paired)
    write_results(
        "infoword_gain",
        argv,
        args.threads,
        seeds,
        stem,
        render,
        paired=args.paired,
        dim_weight=args.dim_weight,
        pretrain=pres,
        rows=rows,
        note=args.note,
    )


if __name__ == "__main__":
    main()
