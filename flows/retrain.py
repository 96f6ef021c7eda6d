"""The `retrain` flow: new data -> continue pre-training the champion -> evaluate -> promote."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from prefect import flow, task

from flows.config import project_root
from flows.evaluate import DEFAULT_EVAL_CORPUS, evaluate_language_model
from flows.pretrain import pretrain
from flows.registry import ModelRegistry
from ptm_core.atomic import atomic_write_text
from ptm_core.data import corpus_files


@task(name="fingerprint-data", retries=2, retry_delay_seconds=[1, 5])
def fingerprint_data(corpus: str) -> str:
    """SHA-256 over the corpus files' names and bytes: changes exactly when the data does."""
    digest = hashlib.sha256()
    for path in corpus_files(corpus):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@flow(name="retrain", log_prints=True)
def retrain(
    corpus: str,
    registry_dir: str = "runs/registry",
    overrides: list[str] | None = None,
    eval_corpus: str | None = None,
    metric: str = "loss",
    seed: int = 0,
    force: bool = False,
) -> dict[str, Any]:
    """Scheduled retraining with a champion/challenger gate.

    1. Fingerprint the corpus; if it has not changed since the last run (and a champion
       exists), stop: there is nothing new to learn.
    2. Continue pre-training from the champion (or from scratch the first time) into
       ``<registry_dir>/runs/<fingerprint>``; a re-run after a crash resumes that run.
    3. Score the candidate and re-score the champion on the same evaluation data and masks.
    4. Promote the candidate only if its ``metric`` is not worse; the registry
       (``champion.json``, ``history.json``) is written atomically.

    Args:
        corpus: the (growing) training corpus, file or directory.
        registry_dir: registry directory.
        overrides: Hydra overrides for the pre-training (e.g. ``experiment=bert_tiny``).
        eval_corpus: held-out evaluation corpus (default: the bundled JSONL sample).
        metric: language-model metric to gate on (masked LM, or permutation LM for XLNet): ``loss`` (default; smooth, lower is better),
            ``perplexity`` (lower is better) or ``accuracy`` (higher is better, noisy on
            small evaluation sets).
        seed: evaluation seed.
        force: retrain even when the data has not changed.
    """
    registry = ModelRegistry(registry_dir)
    state_path = Path(registry_dir) / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    fingerprint = fingerprint_data(corpus)
    champion = registry.champion()
    if champion is not None and state.get("data_fingerprint") == fingerprint and not force:
        print("no new data since the last run; the champion stays")
        return {"status": "no new data", "champion": champion}

    run_dir = Path(registry_dir).resolve() / "runs" / fingerprint[:16]
    run_overrides = [
        *(overrides or []),
        f"data.corpus={Path(corpus).resolve()}",
        f"trainer.output_dir={run_dir}",
    ]
    if champion is not None:
        run_overrides.append(f"init_from={champion['model_dir']}")
    summary = pretrain(run_overrides)

    eval_corpus = eval_corpus or str(project_root() / DEFAULT_EVAL_CORPUS)
    scores = evaluate_language_model(summary["encoder_dir"], eval_corpus, seed)
    extra: dict[str, Any] = {"data_fingerprint": fingerprint, "eval_corpus": eval_corpus}
    if champion is not None:
        champion_scores = evaluate_language_model(champion["model_dir"], eval_corpus, seed)
        registry.rescore_champion(champion_scores[metric])
    decision = registry.consider(
        summary["encoder_dir"],
        scores,
        metric=metric,
        higher_is_better=metric not in ("loss", "perplexity"),
        extra=extra,
    )
    atomic_write_text(state_path, json.dumps({"data_fingerprint": fingerprint}, indent=2))
    print(("promoted: " if decision.promoted else "kept the champion: ") + decision.reason)
    return {
        "status": "promoted" if decision.promoted else "rejected",
        "reason": decision.reason,
        "candidate": summary["encoder_dir"],
        "scores": scores,
        "champion": decision.champion,
    }
