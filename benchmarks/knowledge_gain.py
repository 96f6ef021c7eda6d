"""Does the KG help? ERNIE-THU and K-BERT, each against its own kg-free ablation.

    nice -n 19 python -m benchmarks.knowledge_gain --models ernie_thu --ernie-pretrain-steps 300
    nice -n 19 python -m benchmarks.knowledge_gain --models kbert --kbert-init runs/bert_tiny/final
    nice -n 19 python -m benchmarks.knowledge_gain --models kbert       # K-BERT from random init
    nice -n 19 python -m benchmarks.knowledge_gain --models ernie_thu --ernie-lr 1e-3   # a rate

Each invocation merges its rows into the results (a row per model and setting), so the
parts can run one after another or as parallel processes.

The task is ``configs/task/kg_entity_typing.yaml`` (``data_specs/kg_entity_typing``): is the
entity a neutral sentence names a person, a city or a country? Dev entities never occur in
the training sentences, so on dev only the KG input can carry the answer.

* **ernie_thu**: ``ptm pretrain experiment=ernie_thu_tiny`` once (TransE on the sample KG,
  then MLM + NSP + dEA; ``--ernie-pretrain-steps``, a subprocess, reused while its
  ``final/`` exists), then ``experiment=ernie_thu_finetune_tiny init_from=<final>`` with
  ``ernie_finetune.use_entities=true`` (the task text linked to the KG, TransE embeddings
  fused) vs ``=false`` (the same model and weights, no entity fused).
* **kbert**: ``experiment=kbert_entity_typing_tiny`` with ``kbert.kg=full`` (branches from
  the KG) vs ``kbert.kg=none`` (plain BERT inputs); the tiny BERT from random init, or
  ``--kbert-init <final/>``.

Both arms of a model get the same seeds and budget (``--ernie-steps``/``--ernie-lr``,
``--kbert-steps``/``--kbert-lr``, set up front). Every run goes through
:func:`flows.runner.run_composed` (the code path of ``ptm pretrain experiment=...``), in this
process, into ``$PTM_BENCH_DIR/knowledge-gain/`` (emptied first). Reported: dev accuracy,
mean ± sample std (n - 1) per arm, the per-seed difference (KG - kg-free), its mean ± std,
and the seeds the KG arm won. Writes ``benchmarks/results/knowledge_gain.{md,json}``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "knowledge-gain"
MODELS = ("ernie_thu", "kbert")
# (experiment, the switch's override for the KG arm, for the kg-free arm)
ARMS: dict[str, tuple[str, str, str]] = {
    "ernie_thu": (
        "ernie_thu_finetune_tiny",
        "ernie_finetune.use_entities=true",
        "ernie_finetune.use_entities=false",
    ),
    "kbert": ("kbert_entity_typing_tiny", "kbert.kg=full", "kbert.kg=none"),
}
METRIC = "dev/accuracy"
DEFAULT_ERNIE_LR = 1e-4


def pretrain_ernie(steps: int, threads: int) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=ernie_thu_tiny`` for ``steps`` steps; reused if done."""
    out = WORK / f"pretrain-ernie_thu_tiny-{steps}"
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        record = json.loads(record_path.read_text())
        print(f"pretrain: reusing {final} ({record['wall_s']:.0f} s when made)", flush=True)
        return final, record
    shutil.rmtree(out, ignore_errors=True)
    args = [
        "pretrain",
        "experiment=ernie_thu_tiny",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    print(f"pretrain: ptm {' '.join(args)}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(
        [sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=bench_env(**extra), check=True
    )
    record = {
        "steps": steps,
        "wall_s": time.perf_counter() - start,
        "command": "ptm " + " ".join(args),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record


def transe_probe(embeddings_dir: Path) -> dict[str, Any]:
    """What the KG input can carry at most: logistic regression on the TransE vectors of the
    train entities, scored on the dev entities (entity level, C=1)."""
    from sklearn.linear_model import LogisticRegression

    from ptm_knowledge.kg import load_entity_embeddings

    sys.path.insert(0, str(ROOT / "data_specs" / "kg_entity_typing"))
    import make_sample

    ids, vectors = load_entity_embeddings(embeddings_dir)
    index = {entity: i for i, entity in enumerate(ids)}
    train, dev = make_sample.split_entities(make_sample.typed_entities())
    rows = lambda es: vectors[[index[e.entity_id] for e in es]].numpy()  # noqa: E731
    clf = LogisticRegression(max_iter=2000).fit(rows(train), [e.label for e in train])
    accuracy = float(clf.score(rows(dev), [e.label for e in dev]))
    return {"dev_entity_accuracy": accuracy, "dev_entities": len(dev)}


def run_arm(model: str, kg: bool, seed: int, extra: list[str], tag: str = "") -> dict[str, Any]:
    """One fine-tuning run; returns its overrides and dev metrics."""
    from flows.config import compose_config
    from flows.runner import run_composed

    experiment, on, off = ARMS[model]
    out = WORK / (tag or model) / ("kg" if kg else "kg-free") / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    overrides = [
        f"experiment={experiment}",
        on if kg else off,
        f"seed={seed}",
        *extra,
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    start = time.perf_counter()
    result = run_composed(compose_config(overrides))
    metrics = {k: float(v) for k, v in result.final_metrics.items() if k.startswith("dev/")}
    metrics["train/accuracy"] = float(result.final_metrics.get("accuracy", float("nan")))
    wall = time.perf_counter() - start
    print(
        f"{model} {'kg' if kg else 'kg-free'} seed {seed}: {METRIC} {metrics[METRIC]:.4f}",
        flush=True,
    )
    return {"overrides": overrides, "seed": seed, "metrics": metrics, "wall_s": wall}


def mean_std(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
    }


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per arm mean ± std, the per-seed differences and the seeds won."""
    kg = {r["seed"]: r["metrics"][METRIC] for r in runs["kg"]}
    free = {r["seed"]: r["metrics"][METRIC] for r in runs["kg-free"]}
    seeds = sorted(kg)
    diffs = [kg[s] - free[s] for s in seeds]
    return {
        "kg": mean_std([kg[s] for s in seeds]),
        "kg-free": mean_std([free[s] for s in seeds]),
        "difference": mean_std(diffs),
        "per_seed": {
            str(s): {"kg": kg[s], "kg-free": free[s], "difference": kg[s] - free[s]} for s in seeds
        },
        "seeds_won": sum(d > 0 for d in diffs),
        "seeds": len(seeds),
    }


def render(result: dict[str, Any]) -> str:
    """The markdown report."""
    pct = lambda m: f"{100 * m['mean']:.1f} ± {100 * m['std']:.1f}"  # noqa: E731
    lines = [
        "# Knowledge gain: ERNIE-THU and K-BERT vs their kg-free ablations",
        "",
        "Commands: " + "; ".join(f"{m}: `{c}`" for m, c in result.get("commands", {}).items()),
        "",
        "Task: `kg_entity_typing` (data_specs/kg_entity_typing): person / city / country for the "
        f"entity a neutral sentence names; train {result['task']['train_rows']} rows "
        f"({result['task']['train_entities']} entities), dev {result['task']['dev_rows']} rows "
        f"({result['task']['dev_entities']} unseen entities); majority class "
        f"{100 * result['task']['majority']:.1f} %. Dev accuracy (%), mean ± sample std over "
        f"seeds {result['seeds']}; both arms of a model share seeds and budget.",
        "",
        "| model | budget | with KG | kg-free | KG - kg-free (per seed) | mean diff | seeds won |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for model, row in result["models"].items():
        s = row["summary"]
        per_seed = ", ".join(f"{100 * v['difference']:+.1f}" for v in s["per_seed"].values())
        lines.append(
            f"| {model} | {row['budget']} | {pct(s['kg'])} | {pct(s['kg-free'])} | {per_seed} "
            f"| {100 * s['difference']['mean']:+.1f} ± {100 * s['difference']['std']:.1f} "
            f"| {s['seeds_won']}/{s['seeds']} |"
        )
    lines += [
        "",
        "Exact runs (in process, `flows.runner.run_composed` on the composed config):",
        "",
    ]
    for model, row in result["models"].items():
        for arm in ("kg", "kg-free"):
            first = row["runs"][arm][0]["overrides"]
            lines.append(
                f"- {model} {arm}: `ptm pretrain {' '.join(o for o in first if not o.startswith(('seed=', 'trainer.output_dir')))} seed=<s>`"
            )
    if result.get("transe_probe"):
        probe = result["transe_probe"]
        lines += [
            "",
            "What the KG input can carry: a logistic regression on the pre-training's TransE "
            "vectors of the train entities types the "
            f"{probe['dev_entities']} dev entities at {100 * probe['dev_entity_accuracy']:.1f} %.",
        ]
    for steps, record in sorted(result.get("pretrain", {}).items()):
        lines += [
            "",
            f"ERNIE-THU pre-training ({steps} steps): `{record['command']}` "
            f"({record['wall_s']:.0f} s).",
        ]
    if result.get("notes"):
        lines += ["", result["notes"].strip()]
    return "\n".join(lines) + "\n"


def task_stats() -> dict[str, Any]:
    from collections import Counter

    data = ROOT / "data_specs" / "kg_entity_typing"
    out: dict[str, Any] = {}
    for split in ("train", "dev"):
        rows = [line.split("\t") for line in (data / f"{split}.tsv").read_text().splitlines()[1:]]
        out[f"{split}_rows"] = len(rows)
        if split == "dev":
            out["majority"] = Counter(r[0] for r in rows).most_common(1)[0][1] / len(rows)
    sys.path.insert(0, str(data))
    import make_sample

    train, dev = make_sample.split_entities(make_sample.typed_entities())
    out["train_entities"], out["dev_entities"] = len(train), len(dev)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ernie-pretrain-steps", type=int, default=300)
    parser.add_argument("--ernie-steps", type=int, default=150)
    parser.add_argument("--ernie-lr", type=float, default=DEFAULT_ERNIE_LR)
    parser.add_argument("--kbert-steps", type=int, default=150)
    parser.add_argument("--kbert-lr", type=float, default=1e-3)
    parser.add_argument(
        "--kbert-init", default=None, help="a BERT final/ for K-BERT (default: random init)"
    )
    parser.add_argument("--notes", type=Path, default=None, help="markdown appended to the report")
    parser.add_argument("--out", default="knowledge_gain", help="results/<out>.{md,json}")
    parser.add_argument("--probe-only", action="store_true", help="only the TransE probe")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("PTM_CACHE_DIR", str(WORK / "cache"))
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.probe_only:  # the TransE probe of an existing pre-training, merged into the results
        out = WORK / f"pretrain-ernie_thu_tiny-{args.ernie_pretrain_steps}" / "kg_embeddings"
        probe = {"command": "", "models": {}, "transe_probe": transe_probe(out)}
        if args.notes is not None:
            probe["notes"] = args.notes.read_text(encoding="utf-8")
        print(render(write_results(probe, args.out)))
        return
    result: dict[str, Any] = {
        "command": "nice -n 19 python -m benchmarks.knowledge_gain " + " ".join(sys.argv[1:]),
        "seeds": seeds,
        "task": task_stats(),
        "models": {},
    }
    for model in args.models.split(","):
        if model == "ernie_thu":
            final, record = pretrain_ernie(args.ernie_pretrain_steps, args.threads)
            result["pretrain"] = {str(args.ernie_pretrain_steps): record}
            result["transe_probe"] = transe_probe(final.parent / "kg_embeddings")
            extra = [f"init_from={final}", f"trainer.max_steps={args.ernie_steps}",
                     f"trainer.save_every={args.ernie_steps}", f"trainer.learning_rate={args.ernie_lr}"]  # fmt: skip
            budget = f"{args.ernie_steps} steps, lr {args.ernie_lr:g}"
            tag = f"-pretrain{args.ernie_pretrain_steps}-lr{args.ernie_lr:g}"
        elif model == "kbert":
            extra = [f"trainer.max_steps={args.kbert_steps}", f"trainer.save_every={args.kbert_steps}",
                     f"trainer.learning_rate={args.kbert_lr}"]  # fmt: skip
            if args.kbert_init:
                extra.append(f"kbert.init_from={args.kbert_init}")
            budget = f"{args.kbert_steps} steps, lr {args.kbert_lr:g}" + (
                ", pre-trained BERT" if args.kbert_init else ", random init"
            )
            tag = "-bert-init" if args.kbert_init else ""
        else:
            raise SystemExit(f"unknown model {model!r}; valid: {', '.join(MODELS)}")
        runs = {
            arm: [run_arm(model, arm == "kg", seed, extra, model + tag) for seed in seeds]
            for arm in ("kg", "kg-free")
        }
        key = f"{model} (pre-trained BERT)" if tag else model
        if model == "ernie_thu":
            key = f"ernie_thu (pre-trained {args.ernie_pretrain_steps} steps, lr {args.ernie_lr:g})"
        result["models"][key] = {"budget": budget, "runs": runs, "summary": summarize(runs)}
    if args.notes is not None:
        result["notes"] = args.notes.read_text(encoding="utf-8")
    print(render(write_results(result, args.out)))


def write_results(result: dict[str, Any], name: str) -> dict[str, Any]:
    """Merge into ``results/<name>.json`` (models not run now keep their earlier rows; a
    lock lets the ERNIE and K-BERT parts run as two processes) and rewrite the markdown."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    WORK.mkdir(parents=True, exist_ok=True)
    with (WORK / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        earlier = json.loads(path.read_text()) if path.is_file() else {}
        merged = {**earlier, **{k: v for k, v in result.items() if k != "models" and v}}
        merged["models"] = {**earlier.get("models", {}), **result["models"]}
        merged["commands"] = {
            **earlier.get("commands", {}),
            **{model: result["command"] for model in result["models"]},
        }
        merged["pretrain"] = {**earlier.get("pretrain", {}), **result.get("pretrain", {})}
        path.write_text(json.dumps(merged, indent=1) + "\n")
        (RESULTS / f"{name}.md").write_text(render(merged))
    return merged


if __name__ == "__main__":
    main()
