"""Does GLM's blank infilling help on the gain tasks? GLM vs MLM alone at an equal budget.

    python -m benchmarks.glm_gain --pretrain-steps 1200 --seeds 0,1,2 --threads 1
    python -m benchmarks.glm_gain --pretrain-steps 100 --seeds 0,1,2 --tasks gain_kind

Both arms pre-train the same tiny BERT (2 x 128) on the gain suite's generated corpus with
its vocabulary, for the same steps, batch, learning rate and schedule: ``experiment=glm_tiny``
(GLM) and ``experiment=bert_tiny_gain objective=mlm`` (MLM alone, 15%, dynamic). Each task is
then fine-tuned from each ``final/`` with the gain suite's budget
(:data:`benchmarks.finetune_gain.GAIN_BUDGETS`), same seeds. Writes
``benchmarks/results/glm_gain.{md,json}`` with the command that made them.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    GAIN_DIR,
    GAIN_TASKS,
    RESULTS,
    WORK,
    Runner,
    budget_overrides,
    budget_text,
    compare,
    gain_corpus,
    gain_digest,
    read_last_metrics,
    table,
)
from benchmarks.fixtures import ROOT, bench_env

ARMS = {
    "GLM": ["experiment=glm_tiny"],
    "MLM alone": ["experiment=bert_tiny_gain", "objective=mlm"],
}


def pretrain(arm: str, steps: int, threads: int) -> tuple[Path, dict[str, Any]]:
    """One arm's ``ptm pretrain`` on the gain corpus; reused if done."""
    corpus, stats = gain_corpus()
    slug = arm.lower().replace(" ", "_")
    out = WORK / f"pretrain-glm_gain-{slug}-{steps}-{gain_digest()}"
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        print(f"pretrain {arm}: reusing {final}", flush=True)
        return final, json.loads(record_path.read_text())
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        *ARMS[arm],
        f"data.corpus={corpus}",
        f"data.tokenizer={GAIN_DIR / 'vocab.txt'}",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    shutil.rmtree(out, ignore_errors=True)
    print(f"pretrain {arm}: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    record = {
        "arm": arm,
        "overrides": ARMS[arm],
        "steps": steps,
        "corpus": stats,
        "wall_s": time.perf_counter() - start,
        "last_metrics": read_last_metrics(out),
        "final": str(final),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record


def render(record: dict[str, Any]) -> str:
    lines = [
        "# GLM vs MLM alone on the gain suite (equal pre-training budget)",
        "",
        f"`{record['command']}` ({record['machine']}). Every figure is the dev metric x 100, "
        f"mean ± std over seeds {record['seeds']}; *gain* is the per-seed difference GLM - "
        "MLM. Both arms pre-train the same tiny BERT (2 x 128) on the gain corpus for the same "
        "steps, batch and schedule, then share the fine-tuning budget.",
        "",
    ]
    for arm, pre in record["pretrain"].items():
        last = pre["last_metrics"]
        lines.append(
            f"- {arm}: `ptm pretrain {' '.join(pre['overrides'])} data.corpus=<gain corpus> "
            f"trainer.max_steps={pre['steps']}`, {pre['wall_s']:.0f} s, last loss "
            f"{last.get('loss', float('nan')):.3f}."
        )
    lines += ["", table(record["rows"], lambda row: budget_text(row["budget"])), ""]
    if record.get("note"):
        lines += [record["note"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-steps", type=int, default=1200)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--tasks", default=",".join(GAIN_TASKS))
    parser.add_argument("--threads", type=int, default=1)
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
    finals, pre = {}, {}
    for arm in ARMS:
        finals[arm], pre[arm] = pretrain(arm, args.pretrain_steps, args.threads)
    tag = f"glm-gain-{args.pretrain_steps}-{gain_digest()}"
    runner, rows = Runner(), []
    for task in tasks:
        budget = dict(GAIN_BUDGETS[task])
        arms = {
            arm: (
                f"{tag}/{task}/{arm.split()[0].lower()}",
                [f"model={finals[arm]}", *budget_overrides(budget)],
            )
            for arm in ARMS
        }
        row = compare(runner, seeds, task, arms)
        row["budget"] = budget
        rows.append(row)
    record = {
        "command": "python -m benchmarks.glm_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "pretrain": pre,
        "rows": rows,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "glm_gain.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "glm_gain.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
