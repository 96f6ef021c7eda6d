"""Head importance (Michel et al., 2019) against exhaustive single-head ablation, and CKA of
a pre-trained model against its fine-tuned copies (``ptm analyze MODEL heads`` and
``ptm analyze MODEL representations --compare``).

    nice -n 15 python -m benchmarks.head_importance

One tiny BERT (3 layers x 4 heads, 64 wide) is pre-trained on the sample corpus, then
fine-tuned with 3 seeds on a generated classification task (sentences of random corpus
words; label 1 when one of eight cue words occurs, so [CLS] must gather it through
attention).
For each seed: the Spearman rank correlation over the 12 heads of Michel et al.'s
``E|dL/d xi_h|`` against (a) the mean |loss change| per batch when the head alone is gated
off, (b) the mean loss increase; and the linear CKA of each layer of the pre-trained model
against the same layer of the fine-tuned one (on the task's dev sentences). Writes
``benchmarks/results/head_importance.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parents[1]
# Whole words of the sample vocabulary (one token each), so a cue is one token to find.
CUES = ["animals", "ancient", "america", "apartment", "address", "amazon", "algae", "across"]


def _task_files(folder: Path, seed: int = 0) -> tuple[Path, Path, Path]:
    words = sorted(
        {
            w.strip(".,;:!?\"'()").lower()
            for w in (REPO / "data_specs/text_corpus/sample/corpus.txt").read_text().split()
        }
        - {""}
        - set(CUES)
    )
    vocabulary = set((REPO / "data_specs/text_corpus/sample-vocab.txt").read_text().split())
    missing = [cue for cue in CUES if cue not in vocabulary]
    if missing:
        raise SystemExit(f"cue words {missing} are not whole tokens of the sample vocabulary")
    rng = random.Random(seed)

    def row() -> str:
        sentence = rng.choices(words, k=rng.randint(4, 12))
        label = rng.random() < 0.5
        if label:
            sentence.insert(rng.randrange(len(sentence) + 1), rng.choice(CUES))
        return f"{' '.join(sentence)} .\t{int(label)}"

    paths = []
    for name, count in (("train", 800), ("dev", 200)):
        path = folder / f"{name}.tsv"
        path.write_text("sentence\tlabel\n" + "\n".join(row() for _ in range(count)) + "\n")
        paths.append(path)
    sentences = folder / "dev_sentences.txt"
    sentences.write_text(
        "\n".join(line.split("\t")[0] for line in paths[1].read_text().splitlines()[1:]) + "\n"
    )
    return paths[0], paths[1], sentences


def run(args: argparse.Namespace) -> dict[str, Any]:
    from flows.analyze_repr import heads, representations
    from flows.finetune import run_one
    from flows.pretrain import pretrain

    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        train, dev, sentences = _task_files(root)
        model = [
            "model.num_layers=3",
            "model.num_heads=4",
            "model.hidden_size=64",
            "model.intermediate_size=128",
        ]
        pre = pretrain(
            [
                "experiment=bert_tiny",
                *model,
                "data.max_length=64",
                "data.batch_size=16",
                f"trainer.max_steps={args.pretrain_steps}",
                "trainer.progress=false",
                "trainer.log_every=50",
                f"trainer.output_dir={root / 'pre'}",
            ]
        )
        encoder = Path(pre["encoder_dir"])
        for seed in range(args.seeds):
            run = run_one(
                [
                    "task=sentiment",
                    "task.name=cue_words",
                    f"task.train={train}",
                    f"task.dev={dev}",
                    f"init_from={encoder}",
                    f"seed={seed}",
                    f"trainer.max_steps={args.finetune_steps}",
                    f"trainer.learning_rate={args.finetune_lr}",
                    "trainer.progress=false",
                    f"trainer.output_dir={root / f'ft{seed}'}",
                ]
            )
            final = Path(run["final_dir"])
            head = heads(final, root / f"heads{seed}", batch_size=args.batch_size)
            cka = representations(encoder, root / f"repr{seed}", sentences=sentences, compare=final)
            matrix = cka["cka"]["matrix"]
            rows.append(
                {
                    "seed": seed,
                    "dev_accuracy": run["final_metrics"].get("dev/accuracy"),
                    "dev_loss": head["base_loss"],
                    "spearman_abs_change": head["spearman_abs"],
                    "spearman_loss_increase": head["spearman"],
                    "loss_increase_max": max(max(r) for r in head["loss_increase"]),
                    "cka_same_layer": [matrix[i][i] for i in range(len(matrix))],
                    "anisotropy_pretrained": cka["models"][0]["anisotropy"],
                    "anisotropy_finetuned": cka["models"][1]["anisotropy"],
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return {
        "command": " ".join(["nice -n 15 python -m benchmarks.head_importance", *args.argv]),
        "seconds": round(time.time() - started, 1),
        "settings": {
            "model": "bert_tiny, 3 layers x 4 heads, hidden 64",
            "pretrain_steps": args.pretrain_steps,
            "finetune_steps": args.finetune_steps,
            "finetune_lr": args.finetune_lr,
            "batch_size": args.batch_size,
            "task": "generated cue-word classification, 800 train / 200 dev",
        },
        "runs": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    rows = result["runs"]
    mean = {
        key: statistics.mean(r[key] for r in rows)
        for key in ("spearman_abs_change", "spearman_loss_increase")
    }
    settings = result["settings"]
    lines = [
        "# Head importance vs single-head ablation; CKA pre-trained vs fine-tuned",
        "",
        f"`{result['command']}` ({result['seconds']} s). {settings['model']}, pre-trained "
        f"{settings['pretrain_steps']} steps on the sample corpus, fine-tuned "
        f"{settings['finetune_steps']} steps per seed (learning rate {settings['finetune_lr']}) "
        f"on a {settings['task']} task. "
        "Spearman over all 12 heads of Michel et al.'s E|dL/d xi_h| (dev batches of "
        f"{settings['batch_size']}) against the exhaustive ablation (each head alone gated to "
        "0, every dev batch). CKA: linear CKA of layer i of the pre-trained model against "
        "layer i of the fine-tuned one, on the dev sentences (layer 0 = embeddings).",
        "",
        "| seed | dev acc | dev loss | Spearman vs E\\|loss change\\| | Spearman vs loss "
        "increase | largest loss increase | CKA same layer (0..3) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        accuracy = "" if r["dev_accuracy"] is None else f"{r['dev_accuracy']:.3f}"
        if r["dev_accuracy"] is not None and r["dev_accuracy"] < 0.55:
            accuracy += " (at chance)"
        lines.append(
            f"| {r['seed']} | {accuracy} | {r['dev_loss']:.4f} | {r['spearman_abs_change']:.3f} "
            f"| {r['spearman_loss_increase']:.3f} | {r['loss_increase_max']:+.4f} | "
            + " / ".join(f"{v:.3f}" for v in r["cka_same_layer"])
            + " |"
        )
    lines += [
        f"| **mean** | | | **{mean['spearman_abs_change']:.3f}** | "
        f"**{mean['spearman_loss_increase']:.3f}** | | |",
        "",
        "Anisotropy (mean cosine of random cross-sentence token pairs) per layer, seed 0: "
        "pre-trained "
        + ", ".join(f"{v:.3f}" for v in rows[0]["anisotropy_pretrained"])
        + "; fine-tuned "
        + ", ".join(f"{v:.3f}" for v in rows[0]["anisotropy_finetuned"])
        + ".",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--pretrain-steps", type=int, default=80)
    parser.add_argument("--finetune-steps", type=int, default=120)
    parser.add_argument("--finetune-lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    result = run(args)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "head_importance.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (RESULTS / "head_importance.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
