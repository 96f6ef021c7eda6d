"""Domain-adaptive pre-training with vocabulary extension (BioBERT/SciBERT/DAPT/TAPT) on a
generated drug-class domain whose compound names the base vocabulary splits into 4-8 pieces.

    python -m benchmarks.dapt_gain --dapt-steps 300 --tapt-steps 100 --seeds 0,1,2 --threads 1

Base: the gain suite's BERT-tiny (``ptm pretrain experiment=bert_tiny_gain``, 1200 steps on
the general gain corpus, :func:`benchmarks.finetune_gain.pretrain_gain`; reused when cached).
Domain and task: :mod:`benchmarks.domain_corpus` (dev compounds never occur in fine-tuning).
Arms, each fine-tuned on the task with gain_kind's budget (100 steps, lr 1e-3) per seed:

1. *base*: the base model as is;
2. *DAPT*: ``ptm pretrain init_from=<base> data.corpus=<domain>`` for ``--dapt-steps``;
3. *ext + DAPT*: ``ptm extend-vocab <base> --corpus <domain>`` then the same DAPT from it;
4. *ext + DAPT + TAPT*: 3, then ``--tapt-steps`` more on the task's training sentences.

Pre-training runs once (seed 0); the seeds are the fine-tuning seeds. Writes
``benchmarks/results/dapt_gain.{md,json}`` with the command that made them.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.domain_corpus import compounds, write_corpus, write_task, write_task_text
from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    RESULTS,
    WORK,
    Runner,
    budget_overrides,
    budget_text,
    mean_std,
    pretrain_gain,
    read_last_metrics,
)
from benchmarks.fixtures import ROOT, bench_env

DOCUMENTS = 6000
BUDGET = dict(GAIN_BUDGETS["gain_kind"])  # set before any run of this benchmark
ARMS = ("base", "DAPT", "ext + DAPT", "ext + DAPT + TAPT")


def domain_data(folder: Path) -> dict[str, Any]:
    """The domain corpus, the task files and the TAPT text, generated once into ``folder``."""
    items = compounds()
    corpus, task = folder / "domain.txt", folder / "task"
    if not (folder / "done").is_file():
        shutil.rmtree(folder, ignore_errors=True)
        write_corpus(corpus, items, DOCUMENTS)
        write_task(task, items)
        write_task_text(task / "train.tsv", folder / "task_text.txt")
        (folder / "done").write_text("ok\n")
    return {
        "corpus": corpus,
        "train": task / "train.tsv",
        "dev": task / "dev.tsv",
        "task_text": folder / "task_text.txt",
        "corpus_bytes": corpus.stat().st_size,
        "compounds": len(items),
    }


def ptm(args: Sequence[str], threads: int) -> float:
    """Run ``ptm <args>`` as the user types it; returns the wall time in seconds."""
    command = [sys.executable, "-m", "flows.cli", *args]
    print("ptm " + " ".join(args), flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    return time.perf_counter() - start


def pretrain(init_from: Path, corpus: Path, steps: int, out: Path, threads: int) -> dict[str, Any]:
    """Continued pre-training (bert_tiny_gain's objective and rate) from ``init_from``."""
    if (out / "final").is_dir() and (out / "bench.json").is_file():
        print(f"pretrain: reusing {out / 'final'}", flush=True)
        return dict(json.loads((out / "bench.json").read_text()))
    shutil.rmtree(out, ignore_errors=True)
    wall = ptm(
        [
            "pretrain",
            "experiment=bert_tiny_gain",
            f"init_from={init_from}",
            f"data.corpus={corpus}",
            f"trainer.max_steps={steps}",
            f"trainer.save_every={steps}",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
        ],
        threads,
    )
    record = {"steps": steps, "wall_s": wall, "last_metrics": read_last_metrics(out)}
    (out / "bench.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def render(record: dict[str, Any]) -> str:
    ext, rows = record["extension"], record["arms"]
    base = rows["base"]["values"]
    lines = [
        "# Domain-adaptive pre-training with vocabulary extension (DAPT/TAPT)",
        "",
        f"`{record['command']}` ({record['machine']}). A generated drug-class domain "
        f"(`benchmarks/domain_corpus.py`): {record['data']['compounds']} nonce compounds whose "
        "names the base vocabulary splits into 4-8 pieces, half antibiotics, half painkillers; "
        f"a {record['data']['corpus_bytes'] / 1e6:.2f} MB domain corpus shows each compound's "
        "class, the task (160 train / 200 dev sentences) puts one compound in a neutral frame "
        "and asks its class; dev compounds never occur in fine-tuning. Base: the gain suite's "
        "BERT-tiny (2 x 128, 1200 steps on the general gain corpus). Every figure is dev "
        f"accuracy x 100, mean ± std over fine-tuning seeds {record['seeds']} "
        f"({budget_text(record['budget'])} for every arm); *vs base* is the per-seed difference.",
        "",
        f"Vocabulary extension: `ptm extend-vocab` added {ext['added']} words "
        f"({ext['compounds_added']} of the {record['data']['compounds']} compounds) in "
        f"{ext['wall_s']:.1f} s, {ext['old_size']} -> {ext['new_size']} ids; DAPT "
        f"{record['dapt_steps']} steps on the domain corpus, TAPT {record['tapt_steps']} steps "
        "on the task's training sentences (both bert_tiny_gain's MLM + NSP, lr 1e-3).",
        "",
        "| arm | pre-training | dev accuracy | vs base | seeds won |",
        "|---|---|---|---|---|",
    ]
    for label in ARMS:
        cell = rows[label]
        diff = mean_std([a - b for a, b in zip(cell["values"], base, strict=True)])
        won = sum(a > b for a, b in zip(cell["values"], base, strict=True))
        lines.append(
            f"| {label} | {cell['pretraining']} | {100 * cell['mean']:.1f} ± "
            f"{100 * cell['std']:.1f} | "
            + ("" if label == "base" else f"{100 * diff['mean']:+.1f} ± {100 * diff['std']:.1f}")
            + f" | {'' if label == 'base' else f'{won}/{len(base)}'} |"
        )
    lines += ["", "Pre-training runs:", ""]
    for name, run in record["pretraining"].items():
        last = run["last_metrics"]
        lines.append(
            f"- {name}: {run['steps']} steps, {run['wall_s']:.0f} s, last loss "
            f"{last.get('loss', math.nan):.3f}, mlm/accuracy {last.get('mlm/accuracy', math.nan):.3f}"
        )
    if record.get("note"):
        lines += ["", record["note"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dapt-steps", type=int, default=300)
    parser.add_argument("--tapt-steps", type=int, default=100)
    parser.add_argument("--max-new", type=int, default=300)
    parser.add_argument("--min-count", type=int, default=20)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--note", default="", help="a paragraph written under the table")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the markdown from the JSON with --note"
    )
    args = parser.parse_args(argv)
    if args.render:
        record = json.loads((RESULTS / "dapt_gain.json").read_text())
        record["note"] = args.note or record.get("note", "")
        (RESULTS / "dapt_gain.json").write_text(json.dumps(record, indent=1) + "\n")
        (RESULTS / "dapt_gain.md").write_text(render(record))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    work = WORK / "dapt-gain"
    data = domain_data(work / f"data-{DOCUMENTS}")
    base, _ = pretrain_gain(1200, args.threads)
    tag = f"{args.dapt_steps}-{args.tapt_steps}-{args.max_new}-{args.min_count}"
    ext = work / f"extended-{tag}"
    shutil.rmtree(ext, ignore_errors=True)
    ext_wall = ptm(
        [
            "extend-vocab",
            str(base),
            "--corpus",
            str(data["corpus"]),
            "--output",
            str(ext),
            f"--max-new={args.max_new}",
            f"--min-count={args.min_count}",
        ],
        args.threads,
    )
    added = json.loads((ext / "vocab_extension.json").read_text())
    names = {c.name for c in compounds()}
    runs = {
        "DAPT": pretrain(base, data["corpus"], args.dapt_steps, work / f"dapt-{tag}", args.threads),
        "ext + DAPT": pretrain(
            ext, data["corpus"], args.dapt_steps, work / f"ext-dapt-{tag}", args.threads
        ),
    }
    runs["ext + DAPT + TAPT"] = pretrain(
        work / f"ext-dapt-{tag}" / "final",
        data["task_text"],
        args.tapt_steps,
        work / f"ext-dapt-tapt-{tag}",
        args.threads,
    )
    models = {
        "base": (base, "general corpus only"),
        "DAPT": (work / f"dapt-{tag}" / "final", f"+ {args.dapt_steps} domain steps"),
        "ext + DAPT": (
            work / f"ext-dapt-{tag}" / "final",
            f"extend-vocab, + {args.dapt_steps} domain steps",
        ),
        "ext + DAPT + TAPT": (
            work / f"ext-dapt-tapt-{tag}" / "final",
            f"extend-vocab, + {args.dapt_steps} domain, + {args.tapt_steps} task-text steps",
        ),
    }
    runner = Runner()
    task = ["task=gain_kind", f"task.train={data['train']}", f"task.dev={data['dev']}"]
    arms: dict[str, Any] = {}
    for index, label in enumerate(ARMS):
        model, pretraining = models[label]
        overrides = [*task, f"model={model}", *budget_overrides(BUDGET)]
        print(f"{label}: {' '.join(overrides)}", flush=True)
        done = [runner.run(f"dapt-gain/ft-{tag}/arm{index}", overrides, s) for s in seeds]
        arms[label] = {
            "pretraining": pretraining,
            "model": str(model),
            **mean_std([r["headline"] for r in done]),
            "wall_s": [r["wall_s"] for r in done],
        }
    record = {
        "command": "python -m benchmarks.dapt_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "budget": BUDGET,
        "dapt_steps": args.dapt_steps,
        "tapt_steps": args.tapt_steps,
        "data": {k: str(v) if isinstance(v, Path) else v for k, v in data.items()},
        "extension": {
            "wall_s": ext_wall,
            "added": len(added["words"]),
            "compounds_added": sum(w["word"] in names for w in added["words"]),
            "old_size": added["old_vocab_size"],
            "new_size": added["new_vocab_size"],
            "words": [w["word"] for w in added["words"]],
        },
        "pretraining": runs,
        "arms": arms,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "dapt_gain.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "dapt_gain.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
