"""Does KnowBERT's KAR help? Entity typing with vs without the KARs, 3 seeds.

    nice -n 19 python -m benchmarks.knowbert_gain
    nice -n 19 python -m benchmarks.knowbert_gain --linker-steps 100 --full-steps 300 --threads 2

KnowBERT is pre-trained once, as the paper trains it and as a user types it (subprocesses,
reused while their ``final/`` exists): stage 1, ``ptm pretrain
experiment=knowbert_linker_tiny`` (the linker alone, the encoder frozen; TransE on the
sample KG), then stage 2, ``ptm pretrain experiment=knowbert_tiny
knowbert.init_from=<stage 1 final/>`` (MLM + NSP + linking). Then ``experiment=
knowbert_finetune_tiny init_from=<stage 2 final/>`` on ``kg_entity_typing`` with
``knowbert_finetune.use_kar=true`` (the task text's alias candidates feed the KAR) vs
``=false`` (the same text encoder and weights, no KAR): same seeds, steps and rate.

Dev entities never occur in the training sentences, so on dev only the KG can carry the
answer. Reported: dev accuracy, mean ± sample std per arm, per-seed differences, seeds
won. Writes ``benchmarks/results/knowbert_gain.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env
from benchmarks.knowledge_gain import METRIC, summarize, task_stats

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "knowbert-gain"


def pretrain(name: str, args: list[str], threads: int) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain <args>`` into ``WORK/name`` (reused when done)."""
    out = WORK / name
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        print(f"{name}: reusing {final}", flush=True)
        return final, json.loads(record_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    args = [*args, f"trainer.output_dir={out}", "trainer.progress=false"]
    print(f"{name}: ptm pretrain {' '.join(args)}", flush=True)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "flows.cli", "pretrain", *args],
        cwd=ROOT,
        env=bench_env(OMP_NUM_THREADS=str(threads)),
        check=True,
    )
    last = (out / "metrics.jsonl").read_text().splitlines()[-1]
    record = {
        "command": "ptm pretrain " + " ".join(args),
        "wall_s": time.perf_counter() - start,
        "last": json.loads(last),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record


def finetune(final: Path, use_kar: bool, seed: int, extra: list[str]) -> dict[str, Any]:
    from flows.config import compose_config
    from flows.runner import run_composed

    out = WORK / "finetune" / ("kar" if use_kar else "no-kar") / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    overrides = [
        "experiment=knowbert_finetune_tiny",
        f"init_from={final}",
        f"knowbert_finetune.use_kar={str(use_kar).lower()}",
        f"seed={seed}",
        *extra,
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    start = time.perf_counter()
    result = run_composed(compose_config(overrides))
    metrics = {k: float(v) for k, v in result.final_metrics.items() if k.startswith("dev/")}
    print(f"use_kar={use_kar} seed {seed}: {METRIC} {metrics[METRIC]:.4f}", flush=True)
    return {
        "overrides": overrides,
        "seed": seed,
        "metrics": metrics,
        "wall_s": time.perf_counter() - start,
    }


def render(result: dict[str, Any]) -> str:
    pct = lambda m: f"{100 * m['mean']:.1f} ± {100 * m['std']:.1f}"  # noqa: E731
    s, task = result["summary"], result["task"]
    per_seed = ", ".join(f"{100 * v['difference']:+.1f}" for v in s["per_seed"].values())
    lines = [
        "# KnowBERT: entity typing with vs without the KAR",
        "",
        f"Command: `{result['command']}`",
        "",
        "Task: `kg_entity_typing` (data_specs/kg_entity_typing): person / city / country for the "
        f"entity a neutral sentence names; train {task['train_rows']} rows "
        f"({task['train_entities']} entities), dev {task['dev_rows']} rows "
        f"({task['dev_entities']} unseen entities); majority class {100 * task['majority']:.1f} %."
        f" Dev accuracy (%), mean ± sample std over seeds {result['seeds']}; both arms share "
        "the pre-trained KnowBERT, seeds and budget.",
        "",
        "| budget | with KAR | without KAR | KAR - none (per seed) | mean diff | seeds won |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| {result['budget']} | {pct(s['kg'])} | {pct(s['kg-free'])} | {per_seed} "
        f"| {100 * s['difference']['mean']:+.1f} ± {100 * s['difference']['std']:.1f} "
        f"| {s['seeds_won']}/{s['seeds']} |",
        "",
        "Pre-training (subprocesses, as typed):",
        "",
    ]
    for name, record in result["pretrain"].items():
        last = record["last"]
        losses = ", ".join(f"{k} {v:.3f}" for k, v in last.items() if k.endswith("loss"))
        lines.append(
            f"- {name}: `{record['command']}` ({record['wall_s']:.0f} s; last step: {losses})"
        )
    lines += ["", "Fine-tuning (in process, `flows.runner.run_composed`):", ""]
    for arm in ("kg", "kg-free"):
        first = result["runs"][arm][0]["overrides"]
        shown = " ".join(o for o in first if not o.startswith(("seed=", "trainer.output_dir")))
        lines.append(
            f"- {'with' if arm == 'kg' else 'without'} KAR: `ptm pretrain {shown} seed=<s>`"
        )
    if result.get("notes"):
        lines += ["", result["notes"].strip()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--linker-steps", type=int, default=60)
    parser.add_argument("--full-steps", type=int, default=150)
    parser.add_argument("--finetune-steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--notes", default="")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    WORK.mkdir(parents=True, exist_ok=True)
    linker, linker_record = pretrain(
        f"stage1-linker-{args.linker_steps}",
        ["experiment=knowbert_linker_tiny", f"trainer.max_steps={args.linker_steps}",
         f"trainer.save_every={args.linker_steps}"],
        args.threads,
    )  # fmt: skip
    full, full_record = pretrain(
        f"stage2-full-{args.linker_steps}-{args.full_steps}",
        ["experiment=knowbert_tiny", f"knowbert.init_from={linker}",
         f"trainer.max_steps={args.full_steps}", f"trainer.save_every={args.full_steps}"],
        args.threads,
    )  # fmt: skip
    extra = [
        f"trainer.max_steps={args.finetune_steps}",
        f"trainer.save_every={args.finetune_steps}",
        f"trainer.learning_rate={args.lr}",
    ]
    runs: dict[str, list[dict[str, Any]]] = {"kg": [], "kg-free": []}
    for seed in args.seeds:
        for use_kar, arm in ((True, "kg"), (False, "kg-free")):
            runs[arm].append(finetune(full, use_kar, seed, extra))
    result = {
        "command": "python -m benchmarks.knowbert_gain " + " ".join(argv or sys.argv[1:]),
        "task": task_stats(),
        "seeds": args.seeds,
        "budget": f"{args.finetune_steps} steps, lr {args.lr}; pre-trained {args.linker_steps} "
        f"linker + {args.full_steps} full steps",
        "pretrain": {"stage 1 (linker)": linker_record, "stage 2 (full)": full_record},
        "runs": runs,
        "summary": summarize(runs),
        "notes": args.notes,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "knowbert_gain.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "knowbert_gain.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
