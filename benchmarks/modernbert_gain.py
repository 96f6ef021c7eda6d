"""Does pre-training help ModernBERT? ModernBERT-tiny pre-trained on the gain suite's corpus
vs the same model at random init, fine-tuned on the gain tasks (data_specs/gain_tasks).

    python -m benchmarks.modernbert_gain --pretrain-steps 1200 --seeds 0,1,2 --threads 1
    python -m benchmarks.modernbert_gain --pretrain-steps 300 --seeds 0 --tasks gain_kind,gain_ner

The corpus, the task budgets (:data:`benchmarks.finetune_gain.GAIN_BUDGETS`) and the two arms
are the BERT gain suite's (``python -m benchmarks.finetune_gain --parts gain``): ``ptm
pretrain experiment=modernbert_tiny`` on the generated corpus with the suite's vocabulary,
then each task fine-tuned from its ``final/`` as is and with ``finetune.random_init=true``
(same architecture and tokenizer, re-initialised weights), same budget, same seeds. Writes
``benchmarks/results/modernbert_gain.{md,json}`` with the command that made them.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    GAIN_TASKS,
    RESULTS,
    Runner,
    budget_text,
    gain_digest,
    pretrained_vs_random,
    table,
)
from benchmarks.gain_pretraining import pretrain_on_gain_corpus

EXPERIMENT = "modernbert_tiny"


def pretrain(steps: int, threads: int) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=modernbert_tiny`` on the gain corpus; reused if done."""
    return pretrain_on_gain_corpus(
        f"{EXPERIMENT}_gain",
        [f"experiment={EXPERIMENT}"],
        steps,
        threads,
        extra={"experiment": EXPERIMENT},
    )


def render(record: dict[str, Any]) -> str:
    pre = record["pretrain"]
    last = pre["last_metrics"]
    lines = [
        "# ModernBERT-tiny on the gain suite: pre-trained vs random init",
        "",
        f"`{record['command']}` ({record['machine']}). Every figure is the dev metric x 100, "
        f"mean ± std over seeds {record['seeds']}; *gain* is the per-seed difference. Both arms "
        "share the fine-tuning budget; *random init* keeps the architecture and tokenizer and "
        "re-initialises every weight (`finetune.random_init=true`).",
        "",
        f"Pre-training: `ptm pretrain experiment={EXPERIMENT} data.corpus=<gain corpus> "
        f"trainer.max_steps={pre['steps']}` (ModernBERT 4 x 128: layers 0 and 3 global, a "
        "32-token window in 1 and 2; MLM at 30%, batch 16, peak lr 1e-3) on the generated "
        f"corpus ({pre['corpus']['bytes'] / 1e6:.2f} MB, {pre['corpus']['documents']} "
        f"documents), {pre['wall_s']:.0f} s; last loss {last.get('loss', float('nan')):.3f}, "
        f"mlm/accuracy {last.get('mlm/accuracy', float('nan')):.3f}.",
        "",
        table(record["rows"], lambda row: budget_text(row["budget"])),
        "",
    ]
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
    final, pre = pretrain(args.pretrain_steps, args.threads)
    tag = f"modernbert-gain-{args.pretrain_steps}-{gain_digest()}"
    rows = pretrained_vs_random(
        Runner(), seeds, final, tasks, tag, lambda task: dict(GAIN_BUDGETS[task])
    )
    import platform

    record = {
        "command": "python -m benchmarks.modernbert_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "pretrain": pre,
        "rows": rows,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "modernbert_gain.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "modernbert_gain.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
