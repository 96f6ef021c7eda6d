"""Word-substitution attack (``ptm analyze MODEL attack``) on a classifier ptm pre-trains and
fine-tunes here, with both candidate sources and several budgets.

    nice -n 15 python -m benchmarks.attack --threads 1

Steps, all on data generated here (hotel reviews; nothing from the bundled samples):

1. a corpus of reviews built from templates over 20 positive and 20 negative adjectives,
   40 nouns, intensifiers and time phrases; a review's two adjectives share their polarity;
2. ``ptm pretrain experiment=bert_tiny objective=mlm`` on it (``--pretrain-steps``) and
   ``ptm pretrain experiment=word2vec_tiny`` on it (the word-vector table);
3. ``ptm finetune task=sentiment`` from the pre-trained ``final/`` on labelled reviews that
   use only 14 of the 20 adjectives of each polarity (the other 6 are seen in pre-training
   only: the synonyms a real test set brings);
4. ``ptm analyze final/ attack`` with the word2vec table's neighbours, with the
   pre-trained model's MLM head, and with the MLM's words that are also near in the table
   (``--mlm-filter``), budgets 0, 0.05, 0.1, 0.2 and 0.3 of each review's words.

Writes ``benchmarks/results/attack.{md,json}``; run folders under ``$PTM_BENCH_DIR/attack``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "attack"
BUDGETS = (0.0, 0.05, 0.1, 0.2, 0.3)

POSITIVE = [
    "clean",
    "friendly",
    "spacious",
    "quiet",
    "comfortable",
    "charming",
    "helpful",
    "cosy",
    "bright",
    "modern",
    "lovely",
    "superb",
    "excellent",
    "pleasant",
    "delightful",
    "welcoming",
    "stylish",
    "peaceful",
    "wonderful",
    "great",
]
NEGATIVE = [
    "dirty",
    "rude",
    "cramped",
    "noisy",
    "uncomfortable",
    "shabby",
    "unhelpful",
    "cold",
    "dark",
    "dated",
    "awful",
    "terrible",
    "horrible",
    "unpleasant",
    "dreadful",
    "hostile",
    "tacky",
    "chaotic",
    "miserable",
    "bad",
]
NOUNS = [
    "room",
    "staff",
    "lobby",
    "bed",
    "breakfast",
    "bathroom",
    "pool",
    "view",
    "hotel",
    "reception",
    "balcony",
    "restaurant",
    "location",
    "service",
    "garden",
    "hallway",
    "shower",
    "bar",
    "terrace",
    "gym",
    "carpet",
    "lift",
    "kitchen",
    "towels",
    "minibar",
    "spa",
    "corridor",
    "parking",
    "entrance",
    "wifi",
    "sauna",
    "buffet",
    "suite",
    "window",
    "mattress",
    "pillow",
    "desk",
    "lounge",
    "courtyard",
    "elevator",
]
SUBJECTS = ["we", "my wife", "our group", "my partner", "the kids", "i", "my father"]
VERBS = ["found", "thought", "considered", "felt"]
INTENSIFIERS = ["very", "quite", "rather", "really", "truly", "fairly", "extremely"]
TIMES = ["on arrival", "every morning", "during our stay", "at night", "on the last day"]
TEMPLATES = [
    "the {noun} was {int} {adj} {time} .",
    "{subj} {verb} the {noun} {adj} and the {noun2} {adj2} .",
    "a {adj} {noun} , {int} {adj2} {noun2} {time} .",
    "{time} , the {noun} seemed {adj} but the {noun2} was {int} {adj2} .",
    "{subj} would call the {noun} {adj} , and the {noun2} {adj2} too .",
]
#: Adjectives the classifier is trained on, per polarity (the rest: pre-training only).
SEEN = 14


def review(rng: random.Random, words: list[str]) -> str:
    adj, adj2 = rng.sample(words, 2)
    noun, noun2 = rng.sample(NOUNS, 2)
    return rng.choice(TEMPLATES).format(
        noun=noun,
        noun2=noun2,
        adj=adj,
        adj2=adj2,
        int=rng.choice(INTENSIFIERS),
        time=rng.choice(TIMES),
        subj=rng.choice(SUBJECTS),
        verb=rng.choice(VERBS),
    )


def generate(folder: Path, corpus_lines: int, train: int, dev: int) -> dict[str, Any]:
    """The corpus, the vocabulary and the labelled train/dev files."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    lines = [review(rng, rng.choice([POSITIVE, NEGATIVE])) for _ in range(corpus_lines)]
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    words = sorted({w for line in lines for w in line.split()})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("\n".join(specials + words) + "\n", encoding="utf-8")
    seen = {"pos": POSITIVE[:SEEN], "neg": NEGATIVE[:SEEN]}
    for name, n in (("train", train), ("dev", dev)):
        rows = ["sentence\tlabel"]
        for i in range(n):
            label = "pos" if i % 2 == 0 else "neg"
            rows.append(f"{review(rng, seen[label])}\t{label}")
        (folder / f"{name}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return {"corpus_lines": corpus_lines, "vocabulary": len(words), "train": train, "dev": dev}


def pretrain(name: str, overrides: list[str], threads: int) -> tuple[Path, float]:
    """``ptm pretrain <overrides>`` into ``WORK/name``; reused when the same overrides
    finished there before (the generated data is deterministic)."""
    out = WORK / name
    record = out / "bench.json"
    if (out / "final").is_dir() and record.is_file():
        done = json.loads(record.read_text())
        if done["overrides"] == overrides:
            print(f"pretrain: reusing {out / 'final'} ({done['wall_s']:.0f} s when made)")
            return out / "final", float(done["wall_s"])
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "flows.cli", "pretrain", *overrides]
    command += [f"trainer.output_dir={out}", "trainer.progress=false"]
    print(f"pretrain: {' '.join(command[3:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    wall = time.perf_counter() - start
    record.write_text(json.dumps({"overrides": overrides, "wall_s": wall}) + "\n")
    return out / "final", wall


def polarity(word: str) -> str | None:
    return "pos" if word in POSITIVE else "neg" if word in NEGATIVE else None


def label_preserving(examples: list[dict[str, Any]]) -> dict[str, Any]:
    """Successful attacks whose every swap keeps the word's polarity (an adjective for one
    of the same polarity, another word for a non-adjective): the generator's label still
    holds, so the prediction is wrong. The others changed the meaning or the grammar."""
    won = [e for e in examples if e["status"] == "succeeded"]
    kept = [e for e in won if all(polarity(c["old"]) == polarity(c["new"]) for c in e["changed"])]
    attacked = [e for e in examples if e["status"] != "skipped"]
    return {
        "succeeded": len(won),
        "label_preserving": len(kept),
        "accuracy_under_label_preserving_attack": (len(attacked) - len(kept)) / len(examples),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from flows.analyze_attack import attack
    from flows.finetune import run_one

    if args.threads:
        torch.set_num_threads(args.threads)
    data = WORK / "data"
    stats = generate(data, args.corpus_lines, args.train, args.dev)
    timings: dict[str, float] = {}
    corpus = [f"data.corpus={data / 'corpus.txt'}"]
    mlm, timings["pretrain_mlm_s"] = pretrain(
        "pretrain-mlm",
        [
            "experiment=bert_tiny",
            "objective=mlm",
            *corpus,
            f"data.tokenizer={data / 'vocab.txt'}",
            f"trainer.max_steps={args.pretrain_steps}",
            f"trainer.save_every={args.pretrain_steps}",
        ],
        args.threads,
    )
    table, timings["word2vec_s"] = pretrain(
        "word2vec", ["experiment=word2vec_tiny", *corpus], args.threads
    )
    shutil.rmtree(WORK / "finetune", ignore_errors=True)
    start = time.perf_counter()
    finetuned = run_one(
        [
            "task=sentiment",
            f"task.train={data / 'train.tsv'}",
            f"task.dev={data / 'dev.tsv'}",
            f"model={mlm}",
            f"trainer.max_steps={args.finetune_steps}",
            "trainer.learning_rate=1e-3",
            f"trainer.output_dir={WORK / 'finetune'}",
            "trainer.progress=false",
            "trainer.save_every=100000",
        ]
    )
    timings["finetune_s"] = time.perf_counter() - start
    start = time.perf_counter()
    result = attack(
        finetuned["final_dir"],
        data / "dev.tsv",
        WORK / "report",
        embeddings=table,
        mlm=mlm,
        mlm_filter=True,
        max_perturbed=0.2,
        budgets=BUDGETS,
        candidates=args.candidates,
        min_similarity=args.min_similarity,
        max_examples=args.examples,
        overwrite=True,
    )
    timings["attack_s"] = time.perf_counter() - start
    report = json.loads((WORK / "report" / "attack.json").read_text(encoding="utf-8"))
    return {
        "label_preserving": {
            name: label_preserving(source["examples"]) for name, source in report["sources"].items()
        },
        "command": "nice -n 15 python -m benchmarks.attack " + " ".join(args.argv),
        "data": stats,
        "pretrain_steps": args.pretrain_steps,
        "finetune_steps": args.finetune_steps,
        "finetune_dev": finetuned["final_metrics"],
        "timings": {k: round(v, 1) for k, v in timings.items()},
        "sources": result["sources"],
        "markdown": result["markdown"],
    }


def write(record: dict[str, Any]) -> None:
    RESULTS.mkdir(exist_ok=True)
    body = record["markdown"].split("\n", 2)[2]
    body = body.replace("![accuracy under attack per budget](attack.png)\n", "")
    timings = ", ".join(f"{k.removesuffix('_s')} {v:.0f} s" for k, v in record["timings"].items())
    stats = record["data"]
    lines = [
        "# Word-substitution attack",
        "",
        f"Produced by `{record['command']}` (2 shared CPU cores; {timings}).",
        "",
        f"Generated hotel reviews ({stats['corpus_lines']} corpus lines, {stats['vocabulary']} "
        f"words; {stats['train']} labelled for training, {stats['dev']} for dev). A tiny BERT "
        f"pre-trained with MLM for {record['pretrain_steps']} steps, fine-tuned for "
        f"{record['finetune_steps']} steps on reviews that use only {SEEN} of the 20 "
        "adjectives of each polarity (dev accuracy "
        f"{record['finetune_dev'].get('dev/accuracy', float('nan')):.3f}); word2vec "
        "(skip-gram, 32 dimensions) on the same corpus. The report of `ptm analyze` "
        "follows.",
        "",
        "## Which successes keep the label",
        "",
        "The generator knows each adjective's polarity, so a successful attack is checked: "
        "it keeps the label when every swap puts an adjective of the same polarity for an "
        "adjective (or a non-adjective for a non-adjective). Budget 0.2:",
        "",
        "| candidates | successful | label-preserving | accuracy under label-preserving attack |",
        "|---|---|---|---|",
        *[
            f"| {name} | {row['succeeded']} | {row['label_preserving']} | "
            f"{row['accuracy_under_label_preserving_attack']:.3f} |"
            for name, row in record["label_preserving"].items()
        ],
        "",
        body,
    ]
    (RESULTS / "attack.md").write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    saved = {k: v for k, v in record.items() if k != "markdown"}
    (RESULTS / "attack.json").write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pretrain-steps", type=int, default=1500)
    parser.add_argument("--finetune-steps", type=int, default=150)
    parser.add_argument("--corpus-lines", type=int, default=20000)
    parser.add_argument("--train", type=int, default=1200)
    parser.add_argument("--dev", type=int, default=300)
    parser.add_argument("--examples", type=int, default=200, help="dev examples attacked")
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--min-similarity", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    record = run(args)
    write(record)
    print((RESULTS / "attack.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
