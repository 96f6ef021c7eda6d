"""Does WordNet help ERNIE-THU type held-out nouns? With vs without knowledge, before/after #38.

    nice -n 10 python -m benchmarks.wordnet_knowledge_gain --seeds 0,1,2,3,4 --per-label 60 \
        --pretrain-steps 300 --embed-epochs 100
    nice -n 10 python -m benchmarks.wordnet_knowledge_gain --settings after-rotate --seeds 0,1

The task is ``ptm wordnet-typing``'s (``docs/knowledge/wordnet-typing.md``): the lexname of
a noun that a neutral sentence mentions, dev nouns never seen in training. Built here with
``--labels``/``--per-label``, into ``$PTM_BENCH_DIR/wordnet-knowledge-gain/task``.

The KG is WordNet's noun graph cut to the task's synsets and their hypernym closure
(``write_wordnet_kg(keep=...)``), so TransE fits on two shared cores; the pre-training
corpus is the kept synsets' glosses ("<name>: <definition>.", a document each), linked to that KG.

Per setting (:data:`SETTINGS`: ``before``, the linker of before #38 and the old KG-embedding
code; ``linker-only``, today's linker and the old KG-embedding code; ``after-transe`` and
``after-rotate``, today's linker and KG-embedding code with ``ernie_thu_tiny``'s TransE
block or RotatE): ``ptm pretrain experiment=ernie_thu_tiny`` with that ``data.linker`` and
``knowledge.kg_embeddings`` (a subprocess, reused while its ``final/`` exists), then
``experiment=ernie_thu_finetune_tiny`` on the task with the same ``data.linker`` (the task
text is linked as the corpus was), ``ernie_finetune.use_entities=true`` vs ``=false``.
The rows of settings not named by ``--settings`` are kept from the last run (the old code's
rows cannot be re-run on today's code).
Reuses :mod:`benchmarks.knowledge_gain`'s run, summary and statistics. Writes
``benchmarks/results/wordnet_knowledge_gain.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import knowledge_gain
from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "wordnet-knowledge-gain"
LEGACY_LINKER = {"guard": "none", "disambiguation": "overlap", "threshold": 0.3}
#: Per setting: the linker keys it changes (empty: LinkerSettings' defaults) and the KG
#: embeddings' (``knowledge.kg_embeddings``; empty: ``ernie_thu_tiny``'s TransE block over
#: the KG-embedding code of the commit that ran it). ``before`` and ``linker-only`` ran
#: before the new KG-embedding code (NSSA loss, early stopping on validation MRR) landed;
#: their rows are kept from that run (``--settings`` re-runs only the settings it names).
SETTINGS: dict[str, dict[str, dict[str, Any]]] = {
    "before": {"linker": LEGACY_LINKER, "kge": {}},
    "linker-only": {"linker": {}, "kge": {}},
    "after-transe": {"linker": {}, "kge": {}},
    "after-rotate": {"linker": {}, "kge": {"model": "RotatE"}},
}
#: What each setting's KG embeddings are, for the table.
KGE_NOTE = {
    "before": "TransE, margin loss (old code)",
    "linker-only": "TransE, margin loss (old code)",
    "after-transe": "TransE, NSSA + early stopping",
    "after-rotate": "RotatE, NSSA + early stopping",
}


def linker_overrides(setting: str) -> list[str]:
    """``data.linker.<key>=<value>`` for every linker key the setting changes."""
    values = SETTINGS[setting]["linker"]
    return [f"data.linker.{k}={v}" for k, v in values.items()]


def kge_overrides(setting: str) -> list[str]:
    """``knowledge.kg_embeddings.<key>=<value>`` for every KG-embedding key it changes."""
    return [f"knowledge.kg_embeddings.{k}={v}" for k, v in SETTINGS[setting]["kge"].items()]


def prepare(labels: int, per_label: int, seed: int) -> dict[str, Any]:
    """The task files, the cut KG and the gloss corpus (rebuilt every run: seconds)."""
    from ptm_knowledge.kg.wordnet import read_wordnet, write_wordnet_kg
    from ptm_knowledge.kg.wordnet_typing import build_wordnet_typing

    wordnet = read_wordnet()
    task = build_wordnet_typing(wordnet, labels=labels, per_label=per_label, seed=seed)
    task.write(WORK / "task")
    keep: set[str] = set()
    frontier = [e.entity_id for group in task.entities.values() for e in group]
    while frontier:  # the hypernym closure: what the KG says about a noun's kind
        synset_id = frontier.pop()
        if synset_id in keep:
            continue
        keep.add(synset_id)
        frontier += [
            p.target
            for p in wordnet[synset_id].pointers
            if p.relation in ("hypernym", "instance_hypernym") and p.target in wordnet.synsets
        ]
    kg = write_wordnet_kg(wordnet, WORK / "kg", keep=keep)
    corpus = WORK / "glosses.txt"
    corpus.write_text(
        "".join(f"{s.name}: {s.definition}.\n\n" for s in wordnet if s.id in keep),
        encoding="utf-8",
    )
    return {
        "labels": list(task.labels),
        "rows": {split: len(rows) for split, rows in task.splits.items()},
        "entities": {split: len(group) for split, group in task.entities.items()},
        "kg_entities": kg.entities,
        "kg_triples": kg.triples,
        "corpus_lines": len(keep),
    }


def pretrain(setting: str, steps: int, threads: int, embed_epochs: int) -> tuple[Path, dict]:
    """``ptm pretrain experiment=ernie_thu_tiny`` on the gloss corpus; reused if done."""
    out = WORK / f"pretrain-{setting}-{steps}"
    final, record_path = out / "final", out / "bench.json"
    if final.is_dir() and record_path.is_file():
        return final, json.loads(record_path.read_text())
    shutil.rmtree(out, ignore_errors=True)
    args = [
        "pretrain",
        "experiment=ernie_thu_tiny",
        f"data.kg={WORK / 'kg'}",
        f"data.corpus={WORK / 'glosses.txt'}",
        *linker_overrides(setting),
        *kge_overrides(setting),
        f"knowledge.kg_embeddings.num_epochs={embed_epochs}",
        f"trainer.max_steps={steps}",
        f"trainer.save_every={steps}",
        f"trainer.output_dir={out}",
        "trainer.progress=false",
    ]
    print(f"pretrain {setting}: ptm {' '.join(args)}", flush=True)
    start = time.perf_counter()
    env = bench_env(OMP_NUM_THREADS=str(threads), PTM_CACHE_DIR=str(WORK / "cache"))
    subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env=env, check=True)
    record = {"wall_s": time.perf_counter() - start, "command": "ptm " + " ".join(args)}
    record_path.write_text(json.dumps(record, indent=1) + "\n")
    return final, record


def render(result: dict[str, Any]) -> str:
    """The markdown report."""
    pct = lambda m: f"{100 * m['mean']:.1f} ± {100 * m['std']:.1f}"  # noqa: E731
    task = result["task"]
    lines = [
        "# WordNet knowledge gain: ERNIE-THU with vs without the KG, before/after #38",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Task: `ptm wordnet-typing`, labels {', '.join(task['labels'])}; rows {task['rows']}, "
        f"entities {task['entities']} (dev entities unseen in train). KG: the task synsets and "
        f"their hypernym closure, {task['kg_entities']} entities, {task['kg_triples']} triples; "
        f"pre-training corpus: their {task['corpus_lines']} glosses. Dev accuracy (%), mean ± "
        f"sample std over seeds {result['seeds']}; chance {100 / len(task['labels']):.1f} %.",
        "",
        "| setting | linker | KG embeddings | with KG | kg-free | KG - kg-free (per seed) "
        "| mean diff | seeds won |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for setting, row in result["settings"].items():
        s = row["summary"]
        per_seed = ", ".join(f"{100 * v['difference']:+.1f}" for v in s["per_seed"].values())
        linker = ", ".join(linker_overrides(setting)) or "defaults"
        lines.append(
            f"| {setting} | {linker} | {KGE_NOTE.get(setting, '')} | {pct(s['kg'])} "
            f"| {pct(s['kg-free'])} | {per_seed} "
            f"| {100 * s['difference']['mean']:+.1f} ± {100 * s['difference']['std']:.1f} "
            f"| {s['seeds_won']}/{s['seeds']} |"
        )
    for setting, row in result["settings"].items():
        lines += ["", f"{setting}: pre-training `{row['pretrain']['command']}` "
                  f"({row['pretrain']['wall_s']:.0f} s); fine-tuning budget {row['budget']}; "
                  f"run by `{row.get('command', result['command'])}`."]  # fmt: skip
    if result.get("notes"):
        lines += ["", result["notes"].strip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", default="after-transe,after-rotate")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--labels", type=int, default=4)
    parser.add_argument("--per-label", type=int, default=40)
    parser.add_argument("--pretrain-steps", type=int, default=100)
    parser.add_argument("--embed-epochs", type=int, default=30)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=knowledge_gain.DEFAULT_ERNIE_LR)
    parser.add_argument("--notes", type=Path, default=None, help="markdown appended")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["PTM_CACHE_DIR"] = str(WORK / "cache")
    WORK.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    result: dict[str, Any] = {
        "command": "nice -n 10 python -m benchmarks.wordnet_knowledge_gain "
        + " ".join(sys.argv[1:]),
        "seeds": seeds,
        "task": prepare(args.labels, args.per_label, 0),
        "settings": {},
    }
    # Keep the rows of settings not re-run (same task: the task is rebuilt from its seed).
    previous_path = RESULTS / "wordnet_knowledge_gain.json"
    if previous_path.is_file():
        previous = json.loads(previous_path.read_text())
        if previous.get("task") == result["task"]:
            rerun = set(args.settings.split(","))
            result["settings"] = {
                k: {**v, "command": v.get("command", previous["command"])}
                for k, v in previous["settings"].items()
                if k not in rerun and k in SETTINGS
            }
    task = WORK / "task"
    for setting in args.settings.split(","):
        final, record = pretrain(setting, args.pretrain_steps, args.threads, args.embed_epochs)
        extra = [
            "task@ernie_finetune.task=wordnet_typing",
            f"ernie_finetune.task.train={task / 'train.tsv'}",
            f"ernie_finetune.task.dev={task / 'dev.tsv'}",
            *linker_overrides(setting),
            f"init_from={final}",
            f"trainer.max_steps={args.steps}",
            f"trainer.save_every={args.steps}",
            f"trainer.learning_rate={args.lr}",
        ]
        runs = {
            arm: [
                knowledge_gain.run_arm("ernie_thu", arm == "kg", s, extra, f"wordnet-{setting}")
                for s in seeds
            ]
            for arm in ("kg", "kg-free")
        }
        result["settings"][setting] = {
            "command": result["command"],
            "pretrain": record,
            "budget": f"{args.steps} steps, lr {args.lr:g}",
            "runs": runs,
            "summary": knowledge_gain.summarize(runs),
        }
        write(result, args.notes)  # after each setting: a partial run still reports
    print(render(result))


def write(result: dict[str, Any], notes: Path | None) -> None:
    if notes is not None:
        result["notes"] = notes.read_text(encoding="utf-8")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "wordnet_knowledge_gain.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "wordnet_knowledge_gain.md").write_text(render(result))


if __name__ == "__main__":
    main()
