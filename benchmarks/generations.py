"""The generational claim: static embeddings vs ELMo features vs a fine-tuned Transformer.

    nice -n 19 python -m benchmarks.generations --seeds 0 1 2 --threads 1

Issue 18's claim (static < ELMo < fine-tuned Transformer), measured on the gain suite's
tagging (gain_ner, seqeval F1) and classification (gain_sentiment, accuracy) tasks
(``data_specs/gain_tasks``: dev names and sentiment words never occur in the task's training
file; only the pre-training corpus tells their kind). Every pre-trained model reads the same
generated corpus (``data_specs/gain_tasks/make_corpus.py``, 3.4 MB, cached as
:mod:`benchmarks.finetune_gain` caches it):

* **static**: word2vec skip-gram with negative sampling through gensim (:data:`W2V`), the
  vectors frozen, under the task model below (BiLSTM-CRF tagger / BiLSTM-max classifier,
  :data:`TASK_BUDGET`, same for every feature arm);
* **random vectors**: the same table's shape with random vectors (the floor: no pre-training);
* **ELMo**: ``ptm pretrain experiment=elmo_tiny data.corpus=<corpus>`` (``--elmo-steps``), the
  biLM frozen, a learned scalar mix of its layers (:class:`BiLMWordFeatures`), alone and
  concatenated with the word2vec vectors (ELMo's and TagLM's use);
* **frozen BERT / TagLM over BERT**: the frozen tiny BERT below, a scalar mix of its layers at
  each word's first piece, alone and beside the word2vec vectors;
* **fine-tuned BERT**: the gain suite's tiny BERT (``experiment=bert_tiny_gain``, 1200 + 1200
  steps, :func:`benchmarks.finetune_gain.pretrain_gain`) fine-tuned by the finetune recipe
  with the gain suite's budget (``--reuse``: the finished runs of ``finetune_gain --parts
  gain`` are read from their ``eval.json``).

Mean ± sample std over ``--seeds`` (the task model's init and batch order; each
pre-trained model is trained once). Writes ``benchmarks/results/generations.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    WORK,
    Runner,
    gain_corpus,
    gain_digest,
    mean_std,
    pretrain_gain,
)
from benchmarks.fixtures import ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
GEN = WORK / "generations"
GAIN = ROOT / "data_specs" / "gain_tasks"
TASKS = {"gain_ner": "tagging", "gain_sentiment": "classification"}
ARMS = (
    "random",
    "static",
    "elmo",
    "bert-frozen",
    "static+elmo",
    "static+bert",
    "bert-finetuned",
)
# word2vec (Mikolov et al., 2013) through gensim, set once, not tuned.
W2V: dict[str, Any] = {
    "sg": 1,
    "vector_size": 64,
    "window": 5,
    "negative": 5,
    "sample": 1e-3,
    "min_count": 2,
    "epochs": 5,
}
# The task model and its budget, identical for every feature arm (not tuned on dev).
TASK_BUDGET: dict[str, Any] = {
    "max_steps": 200,
    "learning_rate": 2e-3,
    "batch_size": 16,
    "lstm_hidden": 64,
    "dropout": 0.5,
    "warmup_ratio": 0.1,
}
DEFAULT_ELMO_STEPS = 400


def corpus_sentences(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def word2vec_table(corpus: Path, threads: int) -> tuple[Path, dict[str, Any]]:
    """word2vec on the corpus (gensim), saved as a vector table; reused when present."""
    out = GEN / f"word2vec-{gain_digest()}"
    record_path = out / "bench.json"
    if record_path.is_file():
        return out, json.loads(record_path.read_text())
    from gensim.models import Word2Vec

    start = time.perf_counter()
    model = Word2Vec(corpus_sentences(corpus), seed=0, workers=max(1, threads or 2), **W2V)
    wall = time.perf_counter() - start
    vocab = list(model.wv.index_to_key)
    vectors = torch.tensor(model.wv.vectors, dtype=torch.float32)
    shutil.rmtree(out, ignore_errors=True)
    save_table(out, vocab, vectors)
    record = {"method": "word2vec-sg (gensim)", **W2V, "words": len(vocab), "wall_s": wall}
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"word2vec: {len(vocab)} words in {wall:.0f} s", flush=True)
    return out, record


def save_table(out: Path, vocab: list[str], vectors: torch.Tensor) -> None:
    """A vector table directory (``VectorTable``'s layout; through it when it is installed)."""
    try:
        from ptm_core.data.vector_table import VectorTable
    except ImportError:
        from safetensors.torch import save_file

        out.mkdir(parents=True, exist_ok=True)
        save_file({"vectors": vectors.contiguous()}, str(out / "vectors.safetensors"))
        (out / "vocab.txt").write_text("".join(f"{w}\n" for w in vocab), encoding="utf-8")
        meta = {"format": "ptm-vectors", "version": 1, "method": "word2vec-sg", "dim": 64}
        (out / "table.json").write_text(json.dumps(meta) + "\n")
        return
    VectorTable(vocab=vocab, vectors=vectors, method="word2vec-sg", metadata=dict(W2V)).save(out)


def read_table(path: Path) -> tuple[list[str], torch.Tensor]:
    from safetensors.torch import load_file

    vocab = (path / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    return vocab, load_file(str(path / "vectors.safetensors"))["vectors"]


def pretrain_elmo(corpus: Path, steps: int, threads: int) -> tuple[Path | None, dict[str, Any]]:
    """``ptm pretrain experiment=elmo_tiny data.corpus=<corpus>``; reused when done."""
    try:
        import ptm_classic.recurrent.bilm  # noqa: F401
    except ImportError as exc:
        return None, {"skipped": f"ptm_classic.recurrent.bilm is not there yet ({exc})"}
    out = GEN / f"elmo_tiny-{steps}-{gain_digest()}"
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        return final, json.loads(record_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "flows.cli",
        "pretrain",
        "experiment=elmo_tiny",
        f"data.corpus={corpus}",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    print(f"elmo: {' '.join(command[2:])}", flush=True)
    start = time.perf_counter()
    extra = {"OMP_NUM_THREADS": str(threads)} if threads else {}
    subprocess.run(command, cwd=ROOT, env=bench_env(**extra), check=True)
    from benchmarks.finetune_gain import read_last_metrics

    record = {
        "command": "ptm " + " ".join(command[3:]),
        "steps": steps,
        "wall_s": time.perf_counter() - start,
        "last_metrics": read_last_metrics(out),
    }
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record


def task_data(task: str) -> dict[str, Any]:
    """Words and labels of the task's train and dev files (the presets' readers)."""
    if TASKS[task] == "tagging":
        from ptm_core.finetune.data.conll import read_conll

        train = read_conll(GAIN / "ner_train.txt")
        dev = read_conll(GAIN / "ner_dev.txt", label_names=train.label_names)
        split = {
            name: ([list(e.words) for e in records], [list(e.tags) for e in records])
            for name, records in (("train", train), ("dev", dev))
        }
    else:
        from ptm_core.finetune.data.glue import read_glue

        train = read_glue(GAIN / "sentiment_train.tsv")
        dev = read_glue(GAIN / "sentiment_dev.tsv", label_names=train.label_names)
        split = {
            name: ([e.text.split() for e in records], [int(e.label) for e in records])
            for name, records in (("train", train), ("dev", dev))
        }
    return {"label_names": list(train.label_names), **split}


#: ``BiLMWordFeatures(normalize=...)`` of the ELMo arms (``--elmo-normalize``): "layer" puts
#: each biLM layer through a per-word layer norm before the mix (the tiny biLM's raw states
#: are 10-20x word2vec's norm and swamped the concatenation: static+elmo sentiment 52.2).
ELMO_NORMALIZE: dict[str, str | None] = {"mode": "layer"}


def build_features(arm: str, table: Path, elmo: Path | None, bert: Path, seed: int) -> Any:
    from ptm_classic.finetune.word_features import (
        BiLMWordFeatures,
        EncoderWordFeatures,
        StaticWordEmbedding,
        WordFeatures,
    )

    vocab, vectors = read_table(table)
    static = None
    if arm == "random":
        generator = torch.Generator().manual_seed(1000 + seed)
        static = StaticWordEmbedding(vocab, torch.randn(vectors.shape, generator=generator) * 0.3)
    elif arm.startswith("static"):
        static = StaticWordEmbedding(vocab, vectors)
    lm = None
    if "elmo" in arm:
        assert elmo is not None
        lm = BiLMWordFeatures.from_final(elmo, normalize=ELMO_NORMALIZE["mode"])
    elif "bert" in arm:
        lm = EncoderWordFeatures.from_final(bert)
    return WordFeatures(static=static, lm=lm)


def run_feature_arm(
    arm: str, task: str, data: dict[str, Any], seed: int, table: Path, elmo: Path | None, bert: Path
) -> dict[str, Any]:
    """Train the task model over one arm's features with the core Trainer; dev metric."""
    from ptm_classic.finetune.taglm import TagLMTagger, WordBatches
    from ptm_classic.finetune.word_classifier import WordClassifier
    from ptm_core.finetune.metrics import tagging_metrics
    from ptm_core.training import Trainer, TrainerConfig

    torch.manual_seed(seed)
    features = build_features(arm, table, elmo, bert, seed)
    names = data["label_names"]
    budget = TASK_BUDGET
    model: Any
    if TASKS[task] == "tagging":
        model = TagLMTagger(
            features,
            len(names),
            label_names=names,
            lstm_hidden=budget["lstm_hidden"],
            dropout=budget["dropout"],
        )
    else:
        model = WordClassifier(
            features,
            len(names),
            label_names=names,
            lstm_hidden=budget["lstm_hidden"],
            dropout=budget["dropout"],
        )
    out = GEN / "runs" / arm / task / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    config = TrainerConfig(
        output_dir=str(out),
        max_steps=budget["max_steps"],
        learning_rate=budget["learning_rate"],
        warmup_ratio=budget["warmup_ratio"],
        weight_decay=0.0,
        seed=seed,
        device="cpu",
        save_every=100000,
        log_every=50,
        progress=False,
    )
    batches = WordBatches(model.encode, *data["train"], batch_size=budget["batch_size"], seed=seed)
    start = time.perf_counter()
    Trainer(model, batches, config).fit()
    model.eval()
    sentences, gold = data["dev"]
    predictions: list[Any] = []
    for begin in range(0, len(sentences), 64):
        chunk = sentences[begin : begin + 64]
        if TASKS[task] == "tagging":
            predictions += model.tag(chunk)
        else:
            predictions += model.predict(chunk)
    if TASKS[task] == "tagging":
        metric = tagging_metrics(
            [[names[t] for t in row] for row in predictions],
            [[names[t] for t in row] for row in gold],
        )["f1"]
    else:
        metric = sum(p == g for p, g in zip(predictions, gold, strict=True)) / len(gold)
    wall = time.perf_counter() - start
    print(f"  {arm} {task} seed {seed}: {metric:.4f} ({wall:.0f} s)", flush=True)
    return {"metric": metric, "wall_s": wall}


def run_finetuned(
    runner: Runner, task: str, seeds: Sequence[int], final: Path, steps: int
) -> list[dict[str, Any]]:
    """The finetune recipe on the gain suite's BERT: the folders of ``finetune_gain``'s part."""
    budget = [f"trainer.{k}={v}" for k, v in GAIN_BUDGETS[task].items()]
    name = f"gain-{steps}-{gain_digest()}/{task}/pretrained"
    runs = [runner.run(name, [f"task={task}", f"model={final}", *budget], s) for s in seeds]
    return [{"metric": r["headline"], "wall_s": r["wall_s"]} for r in runs]


LABELS = {
    "random": "random vectors + BiLSTM",
    "static": "word2vec (frozen) + BiLSTM",
    "elmo": "ELMo biLM (frozen, scalar mix) + BiLSTM",
    "bert-frozen": "tiny BERT (frozen, scalar mix, first pieces) + BiLSTM",
    "static+elmo": "word2vec + ELMo (TagLM/ELMo concat) + BiLSTM",
    "static+bert": "word2vec + frozen tiny BERT (TagLM) + BiLSTM",
    "bert-finetuned": "tiny BERT fine-tuned (finetune recipe)",
}


def report(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        "# The generational claim: static vs contextual vs fine-tuned",
        "",
        f"`python -m benchmarks.generations` (every invocation that made these rows is listed "
        f"at the end; {meta['machine']}). Dev metric x 100, mean ± std over seeds "
        f"{meta['seeds']} (the task model's seed; each pre-trained model trained once). "
        "gain_ner: seqeval entity F1; gain_sentiment: accuracy. Feature arms: the same task "
        f"model (BiLSTM-CRF tagger / BiLSTM-max classifier) and budget {TASK_BUDGET}, "
        "pre-trained parts frozen. Fine-tuned BERT: the gain suite's budget "
        f"{GAIN_BUDGETS['gain_ner']} (ner), {GAIN_BUDGETS['gain_sentiment']} (sentiment).",
        "",
        "| arm | " + " | ".join(TASKS) + " |",
        "|---|" + "---|" * len(TASKS),
    ]
    for arm in ARMS:
        row = results["arms"].get(arm)
        if row is None:
            continue
        cells = []
        for task in TASKS:
            cell = row.get(task)
            if cell is None or not cell.get("values"):
                cells.append(row.get("skipped", "not run"))
            else:
                cells.append(f"{100 * cell['mean']:.1f} ± {100 * cell['std']:.1f}")
        lines.append(f"| {LABELS[arm]} | " + " | ".join(cells) + " |")
    modes = sorted(
        {
            str(cell.get("elmo_normalize", "none"))
            for arm, row in results["arms"].items()
            if "elmo" in arm
            for cell in row.values()
            if isinstance(cell, dict)
        }
    )
    if modes:
        lines += [
            "",
            f"ELMo arms: biLM layer states normalised with `{', '.join(modes)}` "
            "(`BiLMWordFeatures(normalize=...)`: layer = a per-word layer norm of every layer "
            "before the scalar mix; none = raw states).",
        ]
    lines += ["", "Pre-training (each once, on the same generated corpus):", ""]
    for name, record in results.get("pretraining", {}).items():
        lines.append(f"- {name}: {describe(record)}")
    if results.get("order"):
        lines += ["", "Order (mean, low to high):", ""]
        lines += [f"- {task}: {' < '.join(order)}" for task, order in results["order"].items()]
    lines += ["", "Invocations that made these rows:", ""]
    lines += [f"- `{m['command']}` ({m['wall_s']:.0f} s)" for m in results.get("invocations", [])]
    return "\n".join(lines) + "\n"


def describe(record: dict[str, Any]) -> str:
    """One line of a pre-training record: its settings and last figures, no paths."""
    keep = {k: v for k, v in record.items() if k not in ("path", "last_metrics", "final")}
    metrics = record.get("last_metrics") or {}
    # The biLM logs its training perplexity as its objective's (lm/perplexity); the records
    # are key-sorted, so sorting by the shown name keeps the line's order.
    shown = {"lm/perplexity": "perplexity"}
    wanted = ("loss", "mlm/accuracy", "perplexity", "heldout_perplexity", "epoch")
    figures = {shown.get(k, k): v for k, v in metrics.items()}
    keep.update({k: round(figures[k], 3) for k in sorted(figures) if k in wanted})
    return ", ".join(
        f"{k} {v:.0f}" if k == "wall_s" else f"{k} {v}"
        for k, v in keep.items()
        if v is not None and k != "continued_from"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--elmo-steps", type=int, default=DEFAULT_ELMO_STEPS)
    parser.add_argument("--bert-steps", type=int, default=1200, help="each of the 2 schedules")
    parser.add_argument("--reuse", action="store_true", help="read finished fine-tuning runs")
    parser.add_argument(
        "--elmo-normalize",
        default="layer",
        choices=["layer", "mix", "none"],
        help="BiLMWordFeatures normalize (none = the raw states)",
    )
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--render", action="store_true", help="rewrite the .md from the .json")
    args = parser.parse_args(argv)
    if args.render:
        text = report(json.loads((RESULTS / "generations.json").read_text()))
        (RESULTS / "generations.md").write_text(text)
        print(text)
        return
    arms = [a for a in args.arms.split(",") if a]
    tasks = [t for t in args.tasks.split(",") if t]
    bad = (set(arms) - set(ARMS)) | (set(tasks) - set(TASKS))
    if bad:
        parser.error(f"unknown {sorted(bad)}; arms {','.join(ARMS)}; tasks {','.join(TASKS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    ELMO_NORMALIZE["mode"] = None if args.elmo_normalize == "none" else args.elmo_normalize
    os.environ.update(bench_env())
    GEN.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    corpus, corpus_stats = gain_corpus()
    table, w2v = word2vec_table(corpus, args.threads)
    pretraining: dict[str, Any] = {"corpus": corpus_stats, "word2vec": w2v}
    elmo: Path | None = None
    if any("elmo" in a for a in arms):
        elmo, pretraining["elmo"] = pretrain_elmo(corpus, args.elmo_steps, args.threads)
    bert, record = pretrain_gain(args.bert_steps, args.threads)
    bert, record = pretrain_gain(args.bert_steps, args.threads, bert, args.bert_steps)
    pretraining["bert_tiny_gain"] = {
        "command": "ptm pretrain experiment=bert_tiny_gain data.corpus=<corpus> (twice: the "
        "second run init_from the first's final)",
        "steps": f"{args.bert_steps} + {args.bert_steps}",
        **{k: record.get(k) for k in ("wall_s", "last_metrics")},
    }
    results: dict[str, Any] = {"arms": {}, "pretraining": pretraining}
    runner = Runner(reuse=args.reuse)
    for arm in arms:
        row: dict[str, Any] = {}
        if "elmo" in arm and elmo is None:
            row["skipped"] = "ELMo not run: " + pretraining["elmo"].get("skipped", "")
            results["arms"][arm] = row
            continue
        for task in tasks:
            print(f"== {arm} / {task}", flush=True)
            if arm == "bert-finetuned":
                runs = run_finetuned(runner, task, args.seeds, bert, 2 * args.bert_steps)
            else:
                data = task_data(task)
                runs = [run_feature_arm(arm, task, data, s, table, elmo, bert) for s in args.seeds]
            row[task] = {
                **mean_std([r["metric"] for r in runs]),
                "wall_s": [r["wall_s"] for r in runs],
            }
            if "elmo" in arm:
                row[task]["elmo_normalize"] = args.elmo_normalize
        results["arms"][arm] = row
    json_path = RESULTS / "generations.json"
    invocations: list[dict[str, Any]] = []
    if json_path.is_file() and not args.no_write:  # arms not run keep their earlier rows
        earlier = json.loads(json_path.read_text())
        invocations = earlier.get("invocations", [earlier["meta"]] if "meta" in earlier else [])
        for name, record in earlier.get("pretraining", {}).items():
            results["pretraining"].setdefault(name, record)
        for arm, row in earlier.get("arms", {}).items():
            if arm not in results["arms"]:
                results["arms"][arm] = row
            else:
                for task, cell in row.items():
                    results["arms"][arm].setdefault(task, cell)
    results["order"] = {
        task: [
            arm
            for arm, _ in sorted(
                (
                    (arm, row[task]["mean"])
                    for arm, row in results["arms"].items()
                    if isinstance(row.get(task), dict) and math.isfinite(row[task]["mean"])
                ),
                key=lambda item: item[1],
            )
        ]
        for task in TASKS
    }
    command = "nice -n 19 python -m benchmarks.generations " + " ".join(argv or sys.argv[1:])
    results["meta"] = {
        "command": command.strip(),
        "seeds": args.seeds,
        "wall_s": time.perf_counter() - start,
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, torch CPU",
        "task_budget": TASK_BUDGET,
        "word2vec": W2V,
    }
    results["invocations"] = [*invocations, results["meta"]]
    text = report(results)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        json_path.write_text(json.dumps(results, indent=1) + "\n")
        (RESULTS / "generations.md").write_text(text)


if __name__ == "__main__":
    main()
