"""Does GLM's blank infilling help on the gain tasks? GLM vs MLM alone at an equal budget.

    python -m benchmarks.glm_gain --pretrain-steps 1200 --seeds 0,1,2 --threads 1
    python -m benchmarks.glm_gain --pretrain-steps 100 --seeds 0,1,2 --tasks gain_kind
    python -m benchmarks.glm_gain --arms GLM-Sent,GLM --name glm_sent_gain --seeds 0

Both arms pre-train the same tiny BERT (2 x 128) on the gain suite's generated corpus with
its vocabulary, for the same steps, batch, learning rate and schedule (:data:`ARMS`):
``experiment=glm_tiny`` (GLM), ``experiment=bert_tiny_gain objective=mlm`` (MLM alone, 15%,
dynamic) and GLM with the sentence-level task mixed in (GLM-Sent: 30% of the batches blank
whole sentences as ``[sMASK]``, THUDM/GLM's ``--gap-sentence-prob 0.3``). ``--arms`` picks
the two to compare (the first minus the second). Each task is then fine-tuned from each
``final/`` with the gain suite's budget (:data:`benchmarks.finetune_gain.GAIN_BUDGETS`), same
seeds. Writes ``benchmarks/results/<name>.{md,json}`` (default ``glm_gain``) with the command
that made them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import GAIN_TASKS, Runner, budget_text, gain_digest, table
from benchmarks.gain_pretraining import arm_rows, pretrain_on_gain_corpus, write_results

ARMS = {
    "GLM": ["experiment=glm_tiny"],
    "MLM alone": ["experiment=bert_tiny_gain", "objective=mlm"],
    "GLM-Sent": ["experiment=glm_tiny", "objective.objectives.glm.sentence_prob=0.3"],
}


def slug(arm: str) -> str:
    return arm.lower().replace(" ", "_")


def pretrain(arm: str, steps: int, threads: int) -> tuple[Path, dict[str, Any]]:
    """One arm's ``ptm pretrain`` on the gain corpus; reused if done."""
    return pretrain_on_gain_corpus(
        f"glm_gain-{slug(arm)}",
        ARMS[arm],
        steps,
        threads,
        extra={"arm": arm, "arm_overrides": ARMS[arm]},
    )


def render(record: dict[str, Any]) -> str:
    first, second = record.get("arms", ["GLM", "MLM alone"])
    lines = [
        f"# {first} vs {second} on the gain suite (equal pre-training budget)",
        "",
        f"`{record['command']}` ({record['machine']}). Every figure is the dev metric x 100, "
        f"mean ± std over seeds {record['seeds']}; *gain* is the per-seed difference {first} - "
        f"{second}. Both arms pre-train the same tiny BERT (2 x 128) on the gain corpus for the "
        "same steps, batch and schedule, then share the fine-tuning budget.",
        "",
    ]
    for arm, pre in record["pretrain"].items():
        last = pre["last_metrics"]
        overrides = pre.get("arm_overrides", pre["overrides"])
        lines.append(
            f"- {arm}: `ptm pretrain {' '.join(overrides)} data.corpus=<gain corpus> "
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
    parser.add_argument(
        "--arms", default="GLM,MLM alone", help=f"two of {', '.join(ARMS)} (first minus second)"
    )
    parser.add_argument(
        "--name", default="glm_gain", help="results file stem under benchmarks/results"
    )
    parser.add_argument("--note", default="", help="a paragraph written under the table")
    args = parser.parse_args(argv)
    arms_chosen = [a.strip() for a in args.arms.split(",") if a.strip()]
    if len(arms_chosen) != 2 or len(set(arms_chosen)) != 2 or set(arms_chosen) - set(ARMS):
        parser.error(f"--arms takes two different arms of {', '.join(ARMS)}; got {args.arms!r}")
    seeds = [int(s) for s in args.seeds.split(",")]
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(GAIN_TASKS))
    if unknown:
        parser.error(f"unknown tasks {unknown}; valid: {', '.join(GAIN_TASKS)}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    finals: dict[tuple[str, int], Path] = {}
    pre: dict[str, dict[str, Any]] = {}
    for arm in arms_chosen:
        finals[arm, 0], pre[arm] = pretrain(arm, args.pretrain_steps, args.threads)
    tag = f"glm-gain-{args.pretrain_steps}-{gain_digest()}"
    rows = arm_rows(Runner(), seeds, tasks, finals, tag, slug=lambda arm: arm.split()[0].lower())
    write_results(
        "glm_gain",
        argv,
        args.threads,
        seeds,
        args.name,
        render,
        arms=arms_chosen,
        pretrain=pre,
        rows=rows,
        note=args.note,
    )


if __name__ == "__main__":
    main()
