"""Does image-text pre-training help? VisualBERT/ViLBERT/VL-BERT fine-tuned vs the same from random init.

    python -m benchmarks.multimodal_gain --families visualbert,vilbert --seeds 0,1,2 --threads 1

1. **Pre-train** ``ptm pretrain experiment=<family>_tiny trainer.max_steps=N`` (a
   subprocess; synthetic scenes, MLM + matching, ViLBERT also masked regions) into
   ``$PTM_BENCH_DIR/multimodal-gain/pretrain-<family>-<N>/`` (reused while its ``final/``
   exists).
2. **Tasks** from the synthetic generator
   (:func:`ptm_multimodal.synthetic.write_synthetic_tasks`, ``--train-images`` /
   ``--dev-images``): VQA ("what color is the <shape>" / "what shape is the <color>
   object", ten annotators, official VQA accuracy) and true/false statements
   (classification). No fine-tuning training image shows one of the six held-out
   colour-shape pairs; every dev question/statement is about one. Pre-training captions
   hold all 18 pairs.
3. **Fine-tune** each task with ``ptm pretrain experiment=<family>_vqa_tiny
   init_from=<final>`` (``multimodal_match_finetune`` for statements; subprocesses,
   ``--jobs`` at once, each command recorded in the JSON), pre-trained vs ``multimodal_finetune.random_init=true`` (same architecture,
   every weight re-initialised, head poolers included), seeds ``--seeds``, the same budget
   (:data:`BUDGET`) for both arms.

Writes ``benchmarks/results/multimodal_gain.{md,json}``: mean ± sample std (n - 1) per arm,
per-seed gain, seeds won, and a "train prior" reference (the most common training answer
for the same question text: what a model that ignores the image scores).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "multimodal-gain"
# Set up front for both arms (not tuned per arm).
REUSE = False  # --reuse: read the eval.json of runs already done instead of running them
BUDGET: dict[str, Any] = {"max_steps": 300, "learning_rate": 5e-4, "batch_size": 32}
TASKS = {"vqa": ("vqa", "vqa_accuracy"), "match": ("classification", "accuracy")}


def pretrain(family: str, steps: int, threads: int, seed: int = 0) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=<family>_tiny trainer.max_steps=<steps> [seed=<seed>]``;
    reused if done."""
    out = WORK / (f"pretrain-{family}-{steps}" + (f"-seed{seed}" if seed else ""))
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        f"experiment={family}_tiny",
        f"trainer.max_steps={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
        *([f"seed={seed}"] if seed else []),
    ]
    record_path = out / "bench.json"
    if (out / "final").is_dir() and record_path.is_file():
        print(f"pretrain: reusing {out / 'final'}", flush=True)
        return out / "final", json.loads(record_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    print(f"pretrain: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    record = {
        "command": "ptm " + " ".join(command[3:]),
        "steps": steps,
        "wall_s": time.perf_counter() - start,
    }
    # VL-BERT pre-trains without a matching task: no evaluation.json to read
    if (out / "evaluation.json").is_file():
        evaluation = json.loads((out / "evaluation.json").read_text())
        record["matching_accuracy"] = evaluation["matching"]["accuracy"]
        record["matching_shuffled_images"] = evaluation["matching_shuffled_images"]["accuracy"]
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return out / "final", record


def task_data(train_images: int, dev_images: int) -> tuple[Path, dict[str, Any]]:
    """The synthetic tasks (written once per size) and their sizes."""
    from ptm_multimodal.synthetic import write_synthetic_tasks

    out = WORK / f"tasks-{train_images}-{dev_images}"
    if not (out / "match_dev.jsonl").is_file():
        write_synthetic_tasks(out, train_images=train_images, dev_images=dev_images)
    sizes = {
        f"{name}_{split}": sum(
            1 for line in (out / f"{name}_{split}.jsonl").read_text().splitlines() if line.strip()
        )
        for name in TASKS
        for split in ("train", "dev")
    }
    return out, sizes


def train_prior(data: Path, task: str) -> float:
    """Dev score of the most common training answer/label for the same text pattern."""
    from ptm_multimodal.task_data import vqa_accuracy

    def rows(split: str) -> list[dict[str, Any]]:
        text = (data / f"{task}_{split}.jsonl").read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    if task == "match":
        majority = Counter(r["label"] for r in rows("train")).most_common(1)[0][0]
        dev = rows("dev")
        return sum(r["label"] == majority for r in dev) / len(dev)
    by_question: dict[str, Counter[str]] = {}
    for r in rows("train"):
        by_question.setdefault(r["question"], Counter()).update(r["answers"])
    dev = rows("dev")
    total = 0.0
    for r in dev:
        guess = by_question.get(r["question"], Counter({"": 1})).most_common(1)[0][0]
        total += vqa_accuracy(guess, r["answers"])
    return total / len(dev)


def cloze_probe(final: Path, data: Path) -> dict[str, float]:
    """Zero-shot: the pre-trained masked-LM head answers each VQA question as a cloze.

    ``what color is the <shape>`` -> ``a [MASK] <shape>`` (argmax over the six colours),
    ``what shape is the <color> object`` -> ``a <color> [MASK]`` (over the three shapes),
    with the question's image regions. No fine-tuning: it shows whether pre-training
    learnt the word-region alignment the dev questions need.
    """
    import torch

    from ptm_multimodal.loading import load_multimodal
    from ptm_multimodal.region_features import read_region_features
    from ptm_multimodal.synthetic import COLORS, SHAPES
    from ptm_multimodal.task_data import ImageTextFeaturizer, read_image_text_task, vqa_accuracy

    wrapped, tokenizer = load_multimodal(final)
    wrapped.eval()
    head = wrapped.objectives.objectives["mlm"].head  # type: ignore[union-attr]
    vocab = tokenizer.vocab_info
    features = read_region_features(data)
    scores: dict[str, float] = {}
    for split in ("train", "dev"):
        rows, names = read_image_text_task(data / f"vqa_{split}.jsonl", "vqa", features)
        featurizer = ImageTextFeaturizer(tokenizer, features, "vqa", names, 16)
        total = correct = 0.0
        for row in rows:
            words = row.text.split()
            if words[1] == "color":
                slots, choices = ["a", None, words[-1]], list(COLORS)
            else:
                slots, choices = ["a", words[-2], None], list(SHAPES)
            ids = [vocab.cls_id]
            ids += [vocab.mask_id if w is None else tokenizer.encode(w).input_ids[1] for w in slots]
            ids.append(vocab.sep_id)
            batch = featurizer.featurize([row])
            batch["input_ids"] = torch.tensor([ids])
            batch["attention_mask"] = torch.ones(1, len(ids), dtype=torch.long)
            batch["token_type_ids"] = torch.zeros(1, len(ids), dtype=torch.long)
            with torch.no_grad():
                inputs = {k: batch[k] for k in wrapped.input_keys if k in batch}
                hidden = wrapped.encoder(**inputs).last_hidden_state[0, ids.index(vocab.mask_id)]
                logits = head(hidden[None])[0]
            choice_ids = [tokenizer.encode(c).input_ids[1] for c in choices]
            guess = choices[int(logits[choice_ids].argmax())]
            total += vqa_accuracy(guess, row.answers or [])
            correct += guess == Counter(row.answers).most_common(1)[0][0]
        scores[f"{split}/vqa_accuracy"] = total / len(rows)
        scores[f"{split}/accuracy"] = correct / len(rows)
    return scores


def finetune_command(
    family: str, final: Path, data: Path, task: str, seed: int, random_init: bool
) -> tuple[list[str], Path]:
    """The ``ptm pretrain experiment=<...> init_from=<final>`` command of one run."""
    experiment = f"{family}_vqa_tiny" if task == "vqa" else "multimodal_match_finetune"
    arm = "random" if random_init else "pretrained"
    steps, lr = BUDGET["max_steps"], BUDGET["learning_rate"]
    head = BUDGET.get("head", "cls")
    frozen = bool(BUDGET.get("freeze_backbone"))
    pretrain_seed = BUDGET.get("pretrain_seed", 0)  # another pre-training: folders of its own
    tag = ("-frozen" if frozen else "") + (f"-pretrain{pretrain_seed}" if pretrain_seed else "")
    if head != "cls":  # in-process through finetune_image_text (as the first cloze runs were)
        out = WORK / "runs" / f"{family}-{task}-{head}{tag}-{arm}-seed{seed}-{steps}-{lr}"
        spec = {"final": str(final), "data": str(data), "arm": arm, "seed": seed, "head": head}
        return ["direct", json.dumps({**spec, **BUDGET, "out": str(out)})], out
    out = WORK / "runs" / f"{family}-{task}{tag}-{arm}-seed{seed}-{steps}-{lr}"
    return [
        "pretrain",
        f"experiment={experiment}",
        f"init_from={final}",
        f"seed={seed}",
        f"multimodal_finetune.random_init={str(random_init).lower()}",
        f"multimodal_finetune.task.train={data / f'{task}_train.jsonl'}",
        f"multimodal_finetune.task.dev={data / f'{task}_dev.jsonl'}",
        f"multimodal_finetune.task.batch_size={BUDGET['batch_size']}",
        f"trainer.max_steps={BUDGET['max_steps']}",
        f"trainer.save_every={BUDGET['max_steps']}",
        f"trainer.learning_rate={BUDGET['learning_rate']}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
        *(["multimodal_finetune.freeze_backbone=true"] if frozen else []),
    ], out


def finetune(command: list[str], out: Path, threads: int) -> dict[str, float]:
    """Run one ``ptm pretrain`` fine-tuning command (a subprocess); its dev metrics."""
    if REUSE and (out / "eval.json").is_file():  # --reuse: a finished run of the same command
        metrics = json.loads((out / "eval.json").read_text())
        return {
            k.removeprefix("dev/"): float(v) for k, v in metrics.items() if k.startswith("dev/")
        }
    shutil.rmtree(out, ignore_errors=True)
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    log = out.parent / f"{out.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if command[0] == "direct":
        argv = [sys.executable, "-m", "benchmarks.multimodal_gain", "--direct", command[1]]
    else:
        argv = [sys.executable, "-m", "flows.cli", *command]
    with open(log, "w") as handle:
        subprocess.run(
            argv,
            cwd=ROOT,
            env=bench_env(**extra),
            check=True,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    metrics = json.loads((out / "eval.json").read_text())
    return {k.removeprefix("dev/"): float(v) for k, v in metrics.items() if k.startswith("dev/")}


def shown(command: list[str]) -> str:
    """A run's command as a shell line."""
    if command[0] == "direct":
        return f"python -m benchmarks.multimodal_gain --direct '{command[1]}'"
    return "ptm " + " ".join(command)


def direct_finetune(spec: dict[str, Any]) -> None:
    """One VQA fine-tuning through ``finetune_image_text`` (for ``--head cloze``)."""
    from ptm_core.training import TrainerConfig
    from ptm_multimodal.finetune import finetune_image_text
    from ptm_multimodal.task_spec import ImageTextTask

    data = Path(spec["data"])
    task = ImageTextTask(
        name="synthetic_vqa",
        kind="vqa",
        train=str(data / "vqa_train.jsonl"),
        dev=str(data / "vqa_dev.jsonl"),
        max_length=16,
        batch_size=int(spec["batch_size"]),
        eval_batch_size=64,
    )
    steps = int(spec["max_steps"])
    trainer = TrainerConfig(
        output_dir=spec["out"],
        max_steps=steps,
        learning_rate=float(spec["learning_rate"]),
        warmup_ratio=0.1,
        progress=False,
        save_every=steps,
        log_every=20,
        seed=int(spec["seed"]),
    )
    finetune_image_text(
        task,
        init_from=spec["final"],
        trainer=trainer,
        seed=int(spec["seed"]),
        random_init=spec["arm"] == "random",
        head=spec["head"],
        freeze_backbone=bool(spec.get("freeze_backbone", False)),
    )


def mean_std(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def compare(
    family: str,
    final: Path,
    data: Path,
    task: str,
    seeds: Sequence[int],
    *,
    jobs: int = 1,
    threads: int = 1,
) -> dict[str, Any]:
    """Both arms over ``seeds`` (``jobs`` runs at once): metrics, mean ± std, gains, wins."""
    metric = TASKS[task][1]
    runs = [(arm, seed) for seed in seeds for arm in ("pretrained", "random")]
    commands = {
        run: finetune_command(family, final, data, task, run[1], run[0] == "random") for run in runs
    }
    for arm, seed in runs:
        print(f"finetune: ptm {' '.join(commands[(arm, seed)][0])}", flush=True)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = dict(
            zip(runs, pool.map(lambda r: finetune(*commands[r], threads), runs), strict=True)
        )
    arms = {arm: [done[(arm, seed)] for seed in seeds] for arm in ("pretrained", "random")}
    pre = [m[metric] for m in arms["pretrained"]]
    rnd = [m[metric] for m in arms["random"]]
    gains = [p - r for p, r in zip(pre, rnd, strict=True)]
    return {
        "family": family,
        "task": task,
        "metric": metric,
        "seeds": list(seeds),
        "commands": {f"{arm}/seed{seed}": shown(commands[(arm, seed)][0]) for arm, seed in runs},
        "pretrained": {**mean_std(pre), "per_seed": pre, "all": arms["pretrained"]},
        "random": {**mean_std(rnd), "per_seed": rnd, "all": arms["random"]},
        "gain": {**mean_std(gains), "per_seed": gains},
        "seeds_won": sum(g > 0 for g in gains),
        "train_prior": train_prior(data, task),
        "budget": dict(BUDGET),
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        "# Image-text pre-training vs random init (VisualBERT / ViLBERT / VL-BERT)",
        "",
        f"Command: `{results['command']}`",
        "",
        "Pre-training (synthetic scenes, 400 images; `evaluation.json` matching accuracy on "
        "100 held-out scenes, chance 0.5):",
        "",
    ]
    for family, record in results["pretraining"].items():
        matching = (
            f"matching {record['matching_accuracy']:.3f} "
            f"(shuffled images {record['matching_shuffled_images']:.3f})"
            if "matching_accuracy" in record
            else "no matching task"
        )
        lines.append(f"- {family}: `{record['command']}`: {matching}, {record['wall_s']:.0f} s")
        if "cloze" in record:
            cloze = record["cloze"]
            lines.append(
                f"  - zero-shot cloze probe (no fine-tuning; `a [MASK] <shape>` with the "
                f"question's regions): dev VQA accuracy {cloze['dev/vqa_accuracy'] * 100:.1f}, "
                f"accuracy {cloze['dev/accuracy'] * 100:.1f} (train questions: "
                f"{cloze['train/vqa_accuracy'] * 100:.1f} / {cloze['train/accuracy'] * 100:.1f})"
            )
    sizes = results["task_sizes"]
    lines += [
        "",
        f"Tasks (`write_synthetic_tasks(train_images={results['train_images']}, "
        f"dev_images={results['dev_images']})`): VQA {sizes['vqa_train']} train / "
        f"{sizes['vqa_dev']} dev questions, statements {sizes['match_train']} / "
        f"{sizes['match_dev']}. Dev items are all about colour-shape pairs no fine-tuning "
        "training image shows. Budget (the same for both arms of a row): the row's steps, "
        "batch and learning rate, warm-up 10 %, linear decay.",
        "",
        "| family | task (metric) | budget | pre-trained | random init | gain | per-seed gain "
        "| seeds won | train prior | plain accuracy, pre-trained / random |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        per_seed = ", ".join(f"{g * 100:+.1f}" for g in row["gain"]["per_seed"])
        budget = row.get("budget", BUDGET)
        plain = [
            statistics.fmean(m["accuracy"] for m in row[arm]["all"])
            for arm in ("pretrained", "random")
        ]
        lines.append(
            f"| {row['family']} | {row['task']} ({row['metric']}) | "
            f"{budget['max_steps']} steps, lr {budget['learning_rate']}"
            f"{', head ' + budget['head'] if budget.get('head', 'cls') != 'cls' else ''}"
            f"{', backbone frozen' if budget.get('freeze_backbone') else ''}"
            f"{', seeds ' + ','.join(map(str, row['seeds'])) if row['seeds'] != [0, 1, 2] else ''}"
            f"{', pre-training seed ' + str(budget['pretrain_seed']) if budget.get('pretrain_seed') else ''}"
            f"{', ' + str(budget['pretrain_steps']) + ' pre-training steps' if budget.get('pretrain_steps') else ''} | "
            f"{row['pretrained']['mean'] * 100:.1f} ± {row['pretrained']['std'] * 100:.1f} | "
            f"{row['random']['mean'] * 100:.1f} ± {row['random']['std'] * 100:.1f} | "
            f"{row['gain']['mean'] * 100:+.1f} ± {row['gain']['std'] * 100:.1f} | {per_seed} | "
            f"{row['seeds_won']}/{len(row['seeds'])} | {row['train_prior'] * 100:.1f} | "
            f"{plain[0] * 100:.1f} / {plain[1] * 100:.1f} |"
        )
    lines += [
        "",
        "Scores in percent, mean ± sample std over the seeds. The train prior answers every "
        "dev question with the most common training answer of the same question text (the "
        "majority label for statements): what a model that does not look at the regions "
        "scores.",
        "",
        f"Machine: {results['machine']}.",
    ]
    if results.get("notes"):
        lines += ["", results["notes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="visualbert")
    parser.add_argument("--tasks", default="vqa,match")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--pretrain-steps", type=int, default=1000)
    parser.add_argument("--pretrain-seed", type=int, default=0, help="seed of the pre-training")
    parser.add_argument("--train-images", type=int, default=128)
    parser.add_argument("--dev-images", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, help="fine-tuning runs at once")
    parser.add_argument("--steps", type=int, default=BUDGET["max_steps"])
    parser.add_argument("--lr", type=float, default=BUDGET["learning_rate"])
    parser.add_argument("--head", default="cls", choices=["cls", "cloze"], help="VQA head")
    parser.add_argument(
        "--freeze-backbone", action="store_true", help="train the task head only (both arms)"
    )
    parser.add_argument("--direct", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--reuse", action="store_true", help="read finished runs' eval.json, do not re-run them"
    )
    parser.add_argument("--notes", default=None, help="a file whose text ends the report")
    parser.add_argument("--render", action="store_true", help="rewrite the markdown only")
    args = parser.parse_args(argv)
    import torch

    if args.direct:
        direct_finetune(json.loads(args.direct))
        return
    if args.render:
        results = json.loads((RESULTS / "multimodal_gain.json").read_text())
        if args.notes:
            results["notes"] = Path(args.notes).read_text()
        (RESULTS / "multimodal_gain.json").write_text(json.dumps(results, indent=1) + "\n")
        (RESULTS / "multimodal_gain.md").write_text(report(results))
        return

    global REUSE
    REUSE = args.reuse
    if args.threads:
        torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    BUDGET.update(max_steps=args.steps, learning_rate=args.lr)
    if args.head != "cls":
        BUDGET["head"] = args.head
    if args.freeze_backbone:
        BUDGET["freeze_backbone"] = True
    if args.pretrain_seed:
        BUDGET["pretrain_seed"] = args.pretrain_seed
    if args.pretrain_steps != 1000:  # rows of shorter pre-training are rows of their own
        BUDGET["pretrain_steps"] = args.pretrain_steps
    data, sizes = task_data(args.train_images, args.dev_images)
    results: dict[str, Any] = {
        "command": "python -m benchmarks.multimodal_gain " + " ".join(argv or sys.argv[1:]),
        "train_images": args.train_images,
        "dev_images": args.dev_images,
        "task_sizes": sizes,
        "budget": BUDGET,
        "pretraining": {},
        "rows": [],
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch thread(s), CPU",
        "notes": Path(args.notes).read_text() if args.notes else "",
    }
    for family in args.families.split(","):
        final, record = pretrain(family, args.pretrain_steps, args.threads, args.pretrain_seed)
        record["cloze"] = cloze_probe(final, data)
        seeded = f" (pre-training seed {args.pretrain_seed})" if args.pretrain_seed else ""
        if args.pretrain_steps != 1000:
            seeded += f" ({args.pretrain_steps} pre-training steps)"
        results["pretraining"][family + seeded] = record
        for task in args.tasks.split(","):
            if args.head != "cls" and task != "vqa":
                continue  # the cloze head is a VQA answer head
            row = compare(family, final, data, task, seeds, jobs=args.jobs, threads=args.threads)
            results["rows"].append(row)
            print(json.dumps({k: row[k] for k in ("family", "task", "gain", "seeds_won")}))
    RESULTS.mkdir(exist_ok=True)
    previous = RESULTS / "multimodal_gain.json"
    if previous.is_file():  # rows of other families/tasks from an earlier invocation stay
        earlier = json.loads(previous.read_text())
        for row in earlier.get("rows", []):
            row.setdefault("budget", earlier.get("budget"))

        def key(row: dict[str, Any]) -> tuple[Any, ...]:
            budget = row["budget"]
            steps, lr = budget["max_steps"], budget["learning_rate"]
            frozen = budget.get("freeze_backbone", False)
            seeds = tuple(row["seeds"])
            head, pretrain_seed = budget.get("head", "cls"), budget.get("pretrain_seed", 0)
            pretrain_steps = budget.get("pretrain_steps", 1000)
            return (
                row["family"],
                row["task"],
                steps,
                lr,
                head,
                frozen,
                seeds,
                pretrain_seed,
                pretrain_steps,
            )

        ran = {key(r) for r in results["rows"]}
        kept = [r for r in earlier.get("rows", []) if key(r) not in ran]
        results["rows"] = kept + results["rows"]
        results["pretraining"] = {**earlier.get("pretraining", {}), **results["pretraining"]}
        if earlier.get("command") and kept:
            results["command"] = f"{earlier['command']}; then {results['command']}"
        results["notes"] = results["notes"] or earlier.get("notes", "")
    (RESULTS / "multimodal_gain.json").write_text(json.dumps(results, indent=1) + "\n")
    (RESULTS / "multimodal_gain.md").write_text(report(results))
    print(report(results))


if __name__ == "__main__":
    main()
