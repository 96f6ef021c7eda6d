"""Full fine-tuning vs LoRA vs prompt tuning vs prefix tuning on a tiny BART, on a
generated task.

    nice -n 10 python -m benchmarks.seq2seq_peft --seeds 0,1 --threads 1

The data is generated here (seeded), not a bundled sample: a corpus of sentences
``<name> <verb> <name> in the <place> .`` over nonce names (plus ``<name> is one of the
<group> .``), and a task whose label is whether the verb is a kind or an unkind one
(``helped``... vs ``blamed``...), 400 train and 300 dev rows. (A harder task, the group of
the sentence's subject, left every arm, full fine-tuning included, at the majority class in
200 steps.) A tiny BART (``ptm pretrain experiment=bart_tiny``, its own WordPiece
vocabulary trained on the corpus) pre-trains ``--pretrain-steps`` steps on the corpus;
each arm is then ``ptm finetune task=kg_pair task.train=<generated> ... model=<that
final/> finetune.peft=<method>`` (BART's classification head trains in every arm) for
``--steps`` steps at the method's own rate (:data:`LEARNING_RATES`, set once before any
run). Prints and writes ``benchmarks/results/seq2seq_peft.{md,json}``: dev accuracy x 100
(mean ± sample std over seeds), trainable parameters and the ``final/`` weights' size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

WORK = BENCH_DIR / "seq2seq-peft"
RESULTS = Path(__file__).resolve().parent / "results"
ARMS: dict[str, list[str]] = {
    "full": ["finetune.peft=none"],
    "lora": ["finetune.peft=lora", "finetune.peft_r=8", "finetune.peft_alpha=16"],
    "prompt": ["finetune.peft=prompt", "finetune.peft_virtual_tokens=20"],
    "prefix": ["finetune.peft=prefix", "finetune.peft_virtual_tokens=20"],
}
LEARNING_RATES: dict[str, float] = {"full": 1e-3, "lora": 5e-3, "prompt": 3e-2, "prefix": 1e-2}
SYLLABLES = ("ka", "lo", "mi", "ren", "to", "sa", "vel", "du", "ni", "por", "ze", "bu")
KIND = ("helped", "thanked", "taught", "praised")
UNKIND = ("blamed", "robbed", "insulted", "ignored")
# Label names are words of the corpus, so a text-to-text run (--text-to-text) can write them.
LABELS = ("sailors", "farmers")
CITIES = ("harbor", "valley", "market", "castle", "forest", "river", "tower", "garden")
GROUPS = ("sailors", "farmers")


def names(rng: random.Random, count: int) -> list[str]:
    made: set[str] = set()
    while len(made) < count:
        made.add("".join(rng.sample(SYLLABLES, 2)))
    return sorted(made)


def generate(seed: int = 0) -> tuple[Path, Path, Path]:
    """Corpus, train and dev files under :data:`WORK` (same seed, same files)."""
    rng = random.Random(seed)
    people = names(rng, 24)
    rng.shuffle(people)
    group = {name: i % 2 for i, name in enumerate(people)}
    WORK.mkdir(parents=True, exist_ok=True)

    def sentence() -> tuple[str, int]:
        subject, other = rng.sample(people, 2)
        label = rng.randrange(2)
        verb = rng.choice(KIND if label else UNKIND)
        return f"{subject} {verb} {other} in the {rng.choice(CITIES)} .", label

    lines = []
    for _ in range(6000):
        lines.append(sentence()[0])
        if rng.random() < 0.3:
            person = rng.choice(people)
            lines.append(f"{person} is one of the {GROUPS[group[person]]} .")
    corpus = WORK / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = []
    for split, count in (("train", 400), ("dev", 300)):
        rows = ["sentence\tlabel"]
        for _ in range(count):
            text, label = sentence()
            rows.append(f"{text}\t{LABELS[label]}")
        path = WORK / f"{split}.tsv"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        files.append(path)
    return corpus, files[0], files[1]


def pretrain(corpus: Path, steps: int, threads: int) -> Path:
    digest = hashlib.sha256(corpus.read_bytes()).hexdigest()[:8]
    out = WORK / f"pretrain-bart_tiny-{steps}-{digest}"
    final = out / "final"
    if final.is_dir():
        print(f"pretrain: reusing {final}", flush=True)
        return final
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable, "-m", "flows.cli", "pretrain", "experiment=bart_tiny",
        f"data.corpus={corpus}", "data.tokenizer=null", "data.vocab_size=400",
        "data.max_length=32", f"trainer.max_steps={steps}", f"trainer.save_every={steps}",
        f"trainer.output_dir={out}", "trainer.progress=false",
    ]  # fmt: skip
    print("pretrain: ptm " + " ".join(command[3:]), flush=True)
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    return final


def finetune(
    final: Path, train: Path, dev: Path, arm: str, seed: int, steps: int, text_to_text: bool
) -> dict:
    from flows.finetune import run_one

    folder = WORK / "runs" / ("t2t" if text_to_text else "head") / arm / f"seed{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    overrides = [
        "task=kg_pair", "task.name=kind_verb", f"task.train={train}", f"task.dev={dev}",
        "task.max_length=24", "task.batch_size=16", f"model={final}", f"seed={seed}",
        *ARMS[arm], f"trainer.max_steps={steps}", f"trainer.learning_rate={LEARNING_RATES[arm]}",
        f"trainer.output_dir={folder}", f"trainer.save_every={steps}", "trainer.progress=false",
        f"finetune.text_to_text={str(text_to_text).lower()}",
    ]  # fmt: skip
    start = time.perf_counter()
    metrics = run_one(overrides)["final_metrics"]
    weights = sum(p.stat().st_size for p in (folder / "final").glob("*.safetensors"))
    return {
        "arm": arm,
        "seed": seed,
        "command": "ptm finetune " + " ".join(overrides),
        "accuracy": float(metrics["dev/accuracy"]),
        "trainable": int(metrics["parameters/trainable"]),
        "trainable_share": float(metrics["parameters/trainable_share"]),
        "final_weights_bytes": weights,
        "wall_s": time.perf_counter() - start,
    }


def report(runs: list[dict[str, Any]], settings: dict[str, Any]) -> str:
    lines = [
        "# Full vs LoRA vs prompt vs prefix tuning on a tiny BART (generated task)",
        "",
        f"`{settings['command']}` ({settings['mode']}): tiny BART (2+2 layers, width 64) "
        f"pre-trained {settings['pretrain_steps']} steps on the generated corpus; each arm "
        f"{settings['steps']} steps, seeds {settings['seeds']}; dev accuracy x 100, mean ± "
        "sample std. The task: is the sentence's verb a kind or an unkind one "
        "(nonce names around it), 400 train / 300 dev rows. A classification head trains "
        "in every arm and counts in the trainable parameters (text-to-text: no head, the "
        "LM head stays frozen).",
        "",
        "| method | lr | dev accuracy | trainable parameters (share) | `final/` weights |",
        "| --- | --- | --- | --- | --- |",
    ]
    for arm in ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        if not mine:
            continue
        scores = [100 * r["accuracy"] for r in mine]
        std = statistics.stdev(scores) if len(scores) > 1 else 0.0
        first = mine[0]
        lines.append(
            f"| {arm} | {LEARNING_RATES[arm]:g} | {statistics.fmean(scores):.1f} ± {std:.1f} "
            f"| {first['trainable']:,} ({100 * first['trainable_share']:.2f}%) "
            f"| {first['final_weights_bytes'] / 1e3:.0f} KB |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pretrain-steps", type=int, default=600)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument(
        "--text-to-text", action="store_true", help="generate the label name (T5's mode)"
    )
    parser.add_argument(
        "--lr", action="append", default=[], help="ARM=RATE: another peak rate for an arm"
    )
    args = parser.parse_args(argv)
    for item in args.lr:
        arm, _, rate = item.partition("=")
        LEARNING_RATES[arm] = float(rate)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    corpus, train, dev = generate()
    final = pretrain(corpus, args.pretrain_steps, args.threads)
    runs = []
    for arm in args.arms.split(","):
        for seed in seeds:
            run = finetune(final, train, dev, arm, seed, args.steps, args.text_to_text)
            print(
                f"  {arm} seed {seed}: accuracy {run['accuracy']:.4f}, trainable "
                f"{run['trainable']:,} ({run['trainable_share']:.2%}), {run['wall_s']:.0f} s",
                flush=True,
            )
            runs.append(run)
    settings = {
        "command": "python -m benchmarks.seq2seq_peft "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "pretrain_steps": args.pretrain_steps,
        "steps": args.steps,
        "seeds": seeds,
        "mode": "text-to-text" if args.text_to_text else "classification head",
    }
    text = report(runs, settings)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    name = "seq2seq_peft_t2t" if args.text_to_text else "seq2seq_peft"
    (RESULTS / f"{name}.md").write_text(text, encoding="utf-8")
    (RESULTS / f"{name}.json").write_text(
        json.dumps({"settings": settings, "runs": runs}, indent=2) + "\n", encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
