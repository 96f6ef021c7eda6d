"""The `retrain` flow: new data -> continue pre-training the champion -> evaluate -> promote."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from filelock import BaseFileLock, FileLock, Timeout
from prefect import flow, task

from flows.evaluation import evaluate_language_model
from flows.evaluation_data import (
    MIN_COMPARE_TOKENS,
    check_enough_tokens,
    metrics_lines,
    scored_tokens,
)
from flows.pretrain import pretrain
from flows.registry import LockHeldError, ModelRegistry
from ptm_core.atomic import atomic_write_text
from ptm_core.data import corpus_files
from ptm_core.data.held_out import RUN_SPLIT_DIR, split_held_out

# Corpora are gigabytes: hash them in pieces rather than reading whole files into memory.
FINGERPRINT_CHUNK_BYTES = 1 << 20


def corpus_stat(corpus: str) -> list[list[Any]]:
    """``[path, size, mtime_ns]`` of each corpus file: cheap, and changes when a file does."""
    stats = []
    for path in corpus_files(corpus):
        info = path.stat()
        stats.append([str(path.resolve()), info.st_size, info.st_mtime_ns])
    return stats


@task(name="fingerprint-data", retries=2, retry_delay_seconds=[1, 5])
def fingerprint_data(corpus: str, known: dict[str, Any] | None = None) -> str:
    """SHA-256 over the corpus files' names and bytes: changes exactly when the data does.

    ``known`` is the registry's ``state.json`` of the last run: when every file still has
    the size and ``mtime_ns`` recorded there (``data_stat``), its fingerprint is returned
    without reading the corpus, so a scheduled retrain on an unchanged 100 GB corpus
    decides "no new data" from a ``stat`` of each file (as ``ptm prepare`` does).
    """
    if known and known.get("data_fingerprint") and known.get("data_stat") == corpus_stat(corpus):
        return str(known["data_fingerprint"])
    digest = hashlib.sha256()
    for path in corpus_files(corpus):
        digest.update(path.name.encode())
        with path.open("rb") as handle:
            while chunk := handle.read(FINGERPRINT_CHUNK_BYTES):
                digest.update(chunk)
    return digest.hexdigest()


def _considered_dirs(registry: ModelRegistry) -> set[Path]:
    """Run folders of every candidate the registry has seen, the champion's included."""
    records = [*registry.history(), registry.champion() or {}]
    return {Path(r["model_dir"]).resolve().parent for r in records if "model_dir" in r}


def lock_run_dir(run_dir: Path) -> BaseFileLock:
    """Take ``<run_dir>.lock`` without waiting, so two retrains never share a run folder.

    Returns:
        The held lock; release it when the candidate has been considered.

    Raises:
        LockHeldError: another retrain holds the lock (one line, naming the lock file).
    """
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(run_dir.with_name(run_dir.name + ".lock"))
    try:
        lock.acquire(blocking=False)
    except Timeout:
        raise LockHeldError(
            f"{run_dir}: another retrain holds {lock.lock_file} and is training into this "
            "folder; wait for it to finish, or remove the lock file if it is stale (only if "
            "no such retrain process runs)"
        ) from None
    return lock


def claim_run_dir(
    registry_dir: str | Path, fingerprint: str, registry: ModelRegistry
) -> tuple[Path, BaseFileLock]:
    """The candidate's own run folder, ``runs/<fingerprint16>-<attempt>``, locked.

    A folder the registry has seen (the champion's, or any candidate already considered)
    is never reused, so a candidate never writes over the champion's files or is compared
    with itself. The first attempt not yet considered is returned: a new folder, or one
    whose run crashed before it was considered (pre-training then resumes there).

    Args:
        registry_dir: the registry directory.
        fingerprint: the data fingerprint (its first 16 hex digits name the folder).
        registry: the registry whose history decides which folders are taken.

    Returns:
        The run folder and its held lock.

    Raises:
        LockHeldError: another retrain is training into that folder now.
    """
    runs = Path(registry_dir).resolve() / "runs"
    attempt = 1
    while True:
        run_dir = runs / f"{fingerprint[:16]}-{attempt}"
        if run_dir not in _considered_dirs(registry):
            lock = lock_run_dir(run_dir)
            # Another retrain may have finished with this folder while we looked.
            if run_dir not in _considered_dirs(registry):
                return run_dir, lock
            lock.release()
        attempt += 1


@flow(name="retrain", log_prints=True)
def retrain(
    corpus: str,
    registry_dir: str = "runs/registry",
    overrides: list[str] | None = None,
    eval_corpus: str | None = None,
    metric: str = "loss",
    seed: int = 0,
    force: bool = False,
    gate_task: str | None = None,
    gate_overrides: list[str] | None = None,
    min_eval_tokens: int = MIN_COMPARE_TOKENS,
) -> dict[str, Any]:
    """Scheduled retraining with a champion/challenger gate.

    1. Fingerprint the corpus; if it has not changed since the last run (and a champion
       exists), stop: there is nothing new to learn.
    2. Continue pre-training from the champion (or from scratch the first time) into a
       folder of the candidate's own, ``<registry_dir>/runs/<fingerprint16>-<attempt>``
       (see :func:`claim_run_dir`): the champion's files are only read. A re-run after a
       crash resumes the unfinished candidate; a second retrain while one is training into
       that folder is refused (``<folder>.lock``).
    3. Score the candidate and re-score the champion on the same evaluation data and masks.
    4. Promote the candidate only if its ``metric`` is not worse; the registry
       (``champion.json``, ``history.json``) is written atomically under a file lock.

    Args:
        corpus: the (growing) training corpus, file or directory.
        registry_dir: registry directory.
        overrides: Hydra overrides for the pre-training (e.g. ``experiment=bert_tiny``).
        eval_corpus: held-out evaluation corpus. Default: a deterministic split of
            ``corpus`` (1 document in 20, by a hash of its text, so the documents held out
            stay held out as the corpus grows; :func:`ptm_core.data.held_out.split_held_out`),
            written and recorded in the candidate's ``data_split/``; the candidate trains
            on the rest, and ``ptm evaluate`` of it finds the split there.
        metric: language-model metric to gate on (masked LM, or permutation LM for
            XLNet): ``loss`` (default; smooth, lower is better), ``perplexity`` (lower is
            better) or ``accuracy`` (higher is better, noisy on small evaluation sets).
        seed: evaluation seed.
        force: retrain even when the data has not changed.
        gate_task: a task preset (``configs/task/``): the candidate and the champion are
            both fine-tuned on it (same seed and budget, in the candidate's run folder)
            and the task's headline dev metric (``<task>/<metric>``, higher is better)
            decides, unless ``metric`` names another ``<task>/...`` metric.
        gate_overrides: overrides for those fine-tuning runs (``trainer.max_steps=...``).
        min_eval_tokens: fewest scored tokens on which the candidate is compared with the
            champion on a language-model metric; fewer is refused before the registry
            changes (:data:`~flows.evaluation_data.MIN_COMPARE_TOKENS`).

    Raises:
        LockHeldError: another retrain is training into the same run folder.
        ValueError: the evaluation scored fewer than ``min_eval_tokens`` tokens.
    """
    registry = ModelRegistry(registry_dir)
    state_path = Path(registry_dir) / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    stat = corpus_stat(corpus)  # before hashing: a file changed meanwhile retrains again
    fingerprint = fingerprint_data(corpus, state)
    champion = registry.champion()
    if champion is not None and state.get("data_fingerprint") == fingerprint and not force:
        print("no new data since the last run; the champion stays")
        return {"status": "no new data", "champion": champion}

    run_dir, run_lock = claim_run_dir(registry_dir, fingerprint, registry)
    try:
        return _train_and_consider(
            registry,
            run_dir,
            corpus,
            overrides,
            eval_corpus,
            metric,
            seed,
            fingerprint,
            stat,
            gate_task,
            gate_overrides or [],
            min_eval_tokens,
        )
    finally:
        # Held until the candidate is in the history: a retrain started meanwhile must not
        # resume this folder.
        run_lock.release()


def _train_and_consider(
    registry: ModelRegistry,
    run_dir: Path,
    corpus: str,
    overrides: list[str] | None,
    eval_corpus: str | None,
    metric: str,
    seed: int,
    fingerprint: str,
    stat: list[list[Any]],
    gate_task: str | None = None,
    gate_overrides: list[str] | None = None,
    min_eval_tokens: int = MIN_COMPARE_TOKENS,
) -> dict[str, Any]:
    champion = registry.champion()
    print(f"training the candidate in {run_dir}")
    train_corpus = Path(corpus).resolve()
    eval_note = "given (--eval-corpus)"
    if eval_corpus is None:
        split = split_held_out(corpus, run_dir / RUN_SPLIT_DIR)
        train_corpus, eval_corpus = Path(split.train), split.held_out
        eval_note = split.describe()
        print(f"held out: {eval_note}")
    run_overrides = [
        *(overrides or []),
        f"data.corpus={train_corpus}",
        f"trainer.output_dir={run_dir}",
    ]
    if champion is not None:
        run_overrides.append(f"init_from={champion['model_dir']}")
    summary = pretrain(run_overrides)

    scores = evaluate_language_model(summary["encoder_dir"], eval_corpus, seed)
    tokens = scored_tokens(scores)
    extra: dict[str, Any] = {
        "data_fingerprint": fingerprint,
        "eval_corpus": eval_corpus,
        "eval_tokens": tokens,
    }
    champion_scores = (
        evaluate_language_model(champion["model_dir"], eval_corpus, seed) if champion else None
    )
    scored = f"; {tokens:,} tokens scored" if tokens is not None else ""
    print(f"evaluation data: {eval_corpus}, {eval_note}{scored}")
    print(metrics_lines("candidate", scores))
    if champion_scores is not None:
        print(metrics_lines("champion", champion_scores))
        if not gate_task:  # a language-model metric decides
            check_enough_tokens(
                tokens, min_eval_tokens, eval_corpus, "the candidate with the champion"
            )
    if gate_task:
        from flows.finetune import downstream_scores, headline_metric

        if not metric.startswith(f"{gate_task}/"):
            metric = headline_metric(gate_task)
        downstream = run_dir / "downstream"  # the candidate's folder: the champion's is read-only
        scores |= downstream_scores(
            summary["encoder_dir"],
            gate_task,
            downstream / "candidate",
            seed=seed,
            overrides=gate_overrides or (),
        )
        if champion is not None and champion_scores is not None:
            champion_scores |= downstream_scores(
                champion["model_dir"],
                gate_task,
                downstream / "champion",
                seed=seed,
                overrides=gate_overrides or (),
            )
    # Re-score and decide in one locked step, against the champion that was re-scored.
    with registry.locked():
        now = registry.champion()
        if (now or {}).get("model_dir") != (champion or {}).get("model_dir"):
            raise ValueError(
                f"{registry.champion_path}: the champion changed to {now and now['model_dir']} "
                f"while this retrain ran; run it again to compare {summary['encoder_dir']} "
                "with the new champion (the candidate's run folder is resumed)"
            )
        if champion_scores is not None:
            registry.rescore_champion(champion_scores[metric])
        decision = registry.consider(
            summary["encoder_dir"],
            scores,
            metric=metric,
            higher_is_better=metric.rpartition("/")[2] not in ("loss", "perplexity", "mse"),
            extra=extra,
        )
    state_path = registry.root / "state.json"
    atomic_write_text(
        state_path, json.dumps({"data_fingerprint": fingerprint, "data_stat": stat}, indent=2)
    )
    print(("promoted: " if decision.promoted else "kept the champion: ") + decision.reason)
    return {
        "status": "promoted" if decision.promoted else "rejected",
        "reason": decision.reason,
        "candidate": summary["encoder_dir"],
        "scores": scores,
        "champion": decision.champion,
    }
