"""Link prediction on the sample KG: KEPLER (tiny) vs PyKEEN TransE vs random ranking.

    nice -n 19 python -m benchmarks.kepler_link_prediction --seeds 0,1,2
    nice -n 19 python -m benchmarks.kepler_link_prediction --seeds 0 --kepler-steps 100

Per seed, one split of ``data_specs/knowledge_graph/sample`` (PyKEEN's splitter, 90/10, the
split :func:`ptm_knowledge.kg.train_kg_embeddings` makes with that seed) serves all three:

* **PyKEEN TransE**: the project's embed-KG path, :func:`train_kg_embeddings` with the
  settings of ``experiment/ernie_thu_tiny.yaml`` (dim 32, 100 epochs); its metrics are
  re-computed with ``ptm_knowledge.kepler.link_prediction`` from the trained model's scores
  and checked against PyKEEN's own (``pykeen_mrr`` in the JSON: the same rank metrics).
* **KEPLER (tiny)**: ``experiment=kepler_tiny`` through the runner
  (:func:`flows.runner.pretrain`; MLM on the sample corpus + KE on the training triples,
  entities = ``[CLS]`` of their descriptions), given the same split
  (``kepler.train_triples``/``kepler.test_triples``) and ranked among the same candidate
  entities.
* **random ranking**: the exact expectation of uniformly random scores.

Metrics: filtered setting, realistic ranks, head and tail queries together (PyKEEN's
``both``). Reported as mean ± sample std over seeds. Writes
``benchmarks/results/kepler_link_prediction.{json,md}``; runs under ``$PTM_BENCH_DIR``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.fixtures import BENCH_DIR, ROOT

RESULTS = Path(__file__).resolve().parent / "results"
WORK = BENCH_DIR / "kepler-link-prediction"
KG_DIR = ROOT / "data_specs" / "knowledge_graph" / "sample"
METRICS = ("mrr", "hits_at_1", "hits_at_3", "hits_at_10", "mean_rank")
TRANSE = {
    "model": "TransE",
    "embedding_dim": 32,
    "num_epochs": 100,
    "batch_size": 32,
    "learning_rate": 0.02,
}


def pykeen_split(kg: Any, seed: int) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """PyKEEN's split of the graph (as ``train_kg_embeddings`` makes it), in our indices."""
    from pykeen.triples import TriplesFactory

    factory = TriplesFactory.from_labeled_triples(np.array(kg.labeled_triples(), dtype=str))
    train, test = factory.split([0.9, 0.1], random_state=seed)
    relation_index = {name: i for i, name in enumerate(kg.triples.relation_names)}

    def ours(mapped: torch.Tensor) -> np.ndarray:
        labels = factory.entity_id_to_label, factory.relation_id_to_label
        return np.array(
            [
                (kg.index[labels[0][h]], relation_index[labels[1][r]], kg.index[labels[0][t]])
                for h, r, t in mapped.tolist()
            ],
            dtype=np.int64,
        )

    return train, test, ours(train.mapped_triples), ours(test.mapped_triples)


def pykeen_scorer(result: Any, kg: Any, relation_to_id: dict[str, int]) -> Any:
    """Scores of the trained PyKEEN model for every entity, in our entity order."""
    model = result.pykeen_model
    entity_to_id = result.pykeen_entity_to_id
    ours = torch.tensor([kg.index[e] for e in entity_to_id], dtype=torch.long)
    theirs = torch.tensor(list(entity_to_id.values()), dtype=torch.long)
    to_pk = torch.full((len(kg),), -1, dtype=torch.long)
    to_pk[ours] = theirs
    names = kg.triples.relation_names
    rel_to_pk = torch.tensor([relation_to_id[n] for n in names], dtype=torch.long)

    @torch.no_grad()
    def score(heads: torch.Tensor, rels: torch.Tensor, tails: torch.Tensor, side: str):
        model.eval()
        if side == "tail":
            raw = model.score_t(torch.stack([to_pk[heads], rel_to_pk[rels]], 1))
        else:
            raw = model.score_h(torch.stack([rel_to_pk[rels], to_pk[tails]], 1))
        out = torch.full((len(heads), len(kg)), float("-inf"))
        out[:, ours] = raw[:, theirs].float()
        return out

    return score


def write_split(kg: Any, triples: np.ndarray, path: Path) -> Path:
    """``(T, 3)`` index triples as a ``triples.tsv`` of the graph's ids, in their order."""
    ids, relations = kg.entity_ids, kg.triples.relation_names
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(f"{ids[h]}\t{relations[r]}\t{ids[t]}\n" for h, r, t in triples.tolist()),
        encoding="utf-8",
    )
    return path


def run_seed(seed: int, kepler_steps: int | None) -> dict[str, Any]:
    from flows.config import compose_config
    from flows.runner import pretrain
    from ptm_core.families import get
    from ptm_knowledge.kepler import (
        KeplerResult,
        KnownTriples,
        evaluate_kepler,
        expected_random_metrics,
        link_prediction_ranks,
        rank_metrics,
    )
    from ptm_knowledge.kg import load_knowledge_graph, train_kg_embeddings

    kg = load_knowledge_graph(KG_DIR)
    train_f, test_f, train, test = pykeen_split(kg, seed)
    known_all = np.concatenate([train, test])
    known = KnownTriples(known_all, len(kg), len(kg.triples.relation_names))

    start = time.perf_counter()
    from ptm_knowledge.kg.embedding_splits import TripleSplit

    # The same 90/10 split for both (no validation split: no early stopping).
    given = TripleSplit(
        [tuple(t) for t in train_f.triples.tolist()],
        [],
        [tuple(t) for t in test_f.triples.tolist()],
        source=f"PyKEEN 0.9/0.1, seed {seed}",
    )
    transe = train_kg_embeddings(kg, seed=seed, split=given, **TRANSE)  # type: ignore[arg-type]
    transe_seconds = time.perf_counter() - start
    assert (transe.num_train, transe.num_test) == (len(train), len(test)), "split differs"
    candidates = torch.tensor(sorted(kg.index[e] for e in transe.pykeen_entity_to_id))
    ranks = link_prediction_ranks(
        pykeen_scorer(transe, kg, train_f.relation_to_id), test, known, candidates=candidates
    )
    transe_ours = rank_metrics(ranks)

    overrides = ["experiment=kepler_tiny", f"seed={seed}", "trainer.progress=false"]
    if kepler_steps is not None:
        overrides.append(f"trainer.max_steps={kepler_steps}")
    out = WORK / f"kepler-seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    split = WORK / f"split-seed{seed}"
    overrides += [
        f"kepler.train_triples={write_split(kg, train, split / 'train.tsv')}",
        f"kepler.test_triples={write_split(kg, test, split / 'test.tsv')}",
    ]
    cfg = compose_config([*overrides, f"trainer.output_dir={out}"])
    start = time.perf_counter()
    kepler = pretrain(get("kepler"), cfg)
    assert isinstance(kepler, KeplerResult) and kepler.ke_objective is not None
    # Ranked among PyKEEN's entities (those in some triple), as TransE is.
    kepler_metrics = evaluate_kepler(
        kepler.ke_objective.text_encoder,
        kepler.ke_objective,
        test,
        known_all,
        batch_size=int(cfg.kepler.eval_batch_size),
        candidates=candidates,
    )
    kepler_seconds = time.perf_counter() - start
    return {
        "seed": seed,
        "num_train": len(train),
        "num_test": len(test),
        "num_candidates": len(candidates),
        "kepler": kepler_metrics,
        "kepler_steps": int(cfg.trainer.max_steps),
        "kepler_seconds": kepler_seconds,
        "kepler_final_mlm_loss": kepler.final_metrics.get("mlm/loss"),
        "kepler_final_ke_loss": kepler.final_metrics.get("ke/loss"),
        "transe": transe_ours,
        "transe_seconds": transe_seconds,
        "pykeen_reported": transe.metrics,
        "random": expected_random_metrics(test, known, candidates=candidates),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    out: dict[str, dict[str, list[float]]] = {}
    for system in ("kepler", "transe", "random"):
        out[system] = {}
        for metric in METRICS:
            values = [row[system][metric] for row in rows]
            std = statistics.stdev(values) if len(values) > 1 else 0.0
            out[system][metric] = [statistics.fmean(values), std]
    return out


def render(result: dict[str, Any]) -> str:
    rows = result["seeds"]
    summary = result["summary"]
    steps = rows[0]["kepler_steps"]
    labels = {
        "kepler": f"KEPLER tiny (2x128, MLM + KE, {steps} steps)",
        "transe": "PyKEEN TransE (dim 32, 100 epochs)",
        "random": "random ranking (expectation)",
    }
    lines = [
        "# Link prediction on the sample KG: KEPLER vs PyKEEN TransE",
        "",
        f"{len(rows)} seed(s) ({', '.join(str(r['seed']) for r in rows)}); per seed one PyKEEN "
        f"90/10 split ({rows[0]['num_train']} train / {rows[0]['num_test']} test triples, "
        f"{rows[0]['num_candidates']} candidate entities). Filtered setting, realistic "
        "ranks, head and tail queries together (PyKEEN's `both`); mean ± std over seeds.",
        "",
        "| system | MRR | Hits@1 | Hits@3 | Hits@10 | mean rank |",
        "|---|---|---|---|---|---|",
    ]
    for system, label in labels.items():
        cells = []
        for metric in METRICS:
            mean, std = summary[system][metric]
            digits = 1 if metric == "mean_rank" else 3
            cells.append(f"{mean:.{digits}f} ± {std:.{digits}f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    parity = max(abs(r["transe"]["mrr"] - r["pykeen_reported"]["mrr"]) for r in rows)
    lines += [
        "",
        f"Same metric code: PyKEEN's own MRR of its TransE and ours differ by at most "
        f"{parity:.2e}. Time per seed: KEPLER "
        f"{statistics.fmean(r['kepler_seconds'] for r in rows):.0f} s, TransE "
        f"{statistics.fmean(r['transe_seconds'] for r in rows):.0f} s "
        f"({result['machine']}).",
        "",
        "Command: `nice -n 19 uv run python -m benchmarks.kepler_link_prediction "
        f"--seeds {','.join(str(r['seed']) for r in rows)}`",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--kepler-steps", type=int, default=None, help="default: the preset's")
    parser.add_argument("--out", default="kepler_link_prediction", help="results/<out>.{md,json}")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (tiny models: 1 is enough)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    WORK.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for seed in args.seeds.split(","):
        rows.append(run_seed(int(seed), args.kepler_steps))
        # Written after every seed, so a long run leaves its finished seeds behind.
        result = {
            "machine": f"{platform.machine()}, {torch.get_num_threads()} thread(s), CPU",
            "seeds": rows,
            "summary": summarise(rows),
        }
        (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
        table = render(result)
        (RESULTS / f"{args.out}.md").write_text(table)
        print(table, flush=True)


if __name__ == "__main__":
    main()
