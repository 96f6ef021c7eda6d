"""The PyKEEN run behind :func:`~ptm_knowledge.kg.train_kg_embeddings`.

PyKEEN's parts only: a model (with its loss), the sLCWA training loop with the basic
negative sampler, an ``EarlyStopper`` on validation MRR (filtered by train) and a filtered
``RankBasedEvaluator`` on test (filtered by train + valid + test). One progress line per
validation evaluation goes through :mod:`logging` (so it shows in Prefect's logs).
"""

from __future__ import annotations

import gc
import logging
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from ptm_core.data.shard_writer import peak_rss_mb
from ptm_knowledge.kg.embedding_settings import EmbeddingSettings
from ptm_knowledge.kg.embedding_splits import TripleSplit

logger = logging.getLogger("ptm_knowledge.kg.embeddings")
# torch_max_mem (PyKEEN's batch-size search) warns at every CPU evaluation that it only
# tunes CUDA; ptm sizes CPU batches itself (evaluation_batch_size), so that is noise.
logging.getLogger("torch_max_mem.api").setLevel(logging.ERROR)

# PyKEEN's names of the metrics we report (head and tail prediction, realistic ranks).
METRIC_KEYS = {
    "mrr": "both.realistic.inverse_harmonic_mean_rank",
    "hits_at_1": "both.realistic.hits_at_1",
    "hits_at_3": "both.realistic.hits_at_3",
    "hits_at_10": "both.realistic.hits_at_10",
    "mean_rank": "both.realistic.arithmetic_mean_rank",
}
#: Relative MRR gain below which an evaluation counts as "no improvement" (PyKEEN's default).
RELATIVE_DELTA = 0.01


@dataclass
class TrainingOutcome:
    """The trained model, its entity matrix (table order) and what metrics.json reports."""

    model: Any
    entity_matrix: torch.Tensor
    test: dict[str, float]
    baseline: dict[str, float]
    report: dict[str, Any] = field(default_factory=dict)


def describe_stop(stopped: bool, best_epoch: int | None) -> str:
    """How a run ended, for its last log line and the end table's header."""
    if best_epoch is None:
        return "no validation ran: --eval-every is above the epochs"
    return f"best epoch {best_epoch}" + (", stopped early" if stopped else "")


def resolve_device(device: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; anything else as torch reads it."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ValueError(f"device (--device) is {device!r}; use auto, cpu or cuda[:N]") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device (--device) is {device!r} but CUDA is not available; use auto")
    return resolved


#: glibc's mallopt parameter number of M_MMAP_THRESHOLD (malloc.h).
_M_MMAP_THRESHOLD = -3
#: Allocations from this size up are mmapped and go back to the OS when freed.
_MMAP_THRESHOLD_BYTES = 1 << 20


def fix_mmap_threshold() -> bool:
    """Pin glibc's mmap threshold at 1 MiB for this process; ``False`` where not glibc.

    Ranking every entity allocates score tensors of 1-32 MiB per batch. glibc's dynamic
    threshold (raised up to 32 MiB after each freed mmapped chunk) puts them on the heap,
    which then fragments and keeps growing: the final evaluation of a 38k-entity KG
    (TransE, dim 128, batches of 6 triples) reached 9.5 GB of RSS, against 1.1 GB with
    the threshold pinned (benchmarks/results/kg_embeddings/notes.md). Pinning it also
    switches the dynamic adjustment off, so the setting holds for the rest of the process.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_BYTES))


def rank_metrics(results: Any) -> dict[str, float]:
    """Our metric names from a PyKEEN ``RankBasedMetricResults``."""
    return {name: float(results.get_metric(key)) for name, key in METRIC_KEYS.items()}


def _factories(entity_ids: list[str], split: TripleSplit) -> tuple[Any, Any, Any]:
    import numpy as np
    from pykeen.triples import TriplesFactory

    entity_to_id = {e: i for i, e in enumerate(entity_ids)}
    relations = sorted({r for part in (split.train, split.valid, split.test) for _, r, _ in part})
    relation_to_id = {r: i for i, r in enumerate(relations)}

    def factory(triples: list[tuple[str, str, str]]) -> Any:
        array = np.array(triples, dtype=str).reshape(-1, 3)
        return TriplesFactory.from_labeled_triples(
            array, entity_to_id=entity_to_id, relation_to_id=relation_to_id
        )

    return factory(split.train), factory(split.valid), factory(split.test)


def evaluation_batch_size(num_entities: int, dim: int) -> int:
    """Test triples scored at once: distance models (TransE, RotatE) broadcast a
    ``(batch, entities, dim)`` tensor, so the batch is sized to keep it near 2**25 floats
    (~256 MB with its complex/temporary copies) instead of PyKEEN's CUDA-only search."""
    return max(1, min(256, 2**25 // max(1, num_entities * dim)))


def valid_subset(valid: Any, size: int, seed: int) -> Any:
    """``size`` triples of the validation factory ``valid`` (a fixed random sample, in file
    order), or all of them when ``size`` is 0 or not smaller: what early stopping scores.

    Filtering still uses every known triple (the stopper filters by the training triples,
    the final evaluation by train + valid), so a sampled triple's rank is the same as in
    the full evaluation; only fewer ranks are averaged.
    """
    total = len(valid.mapped_triples)
    if not size or size >= total:
        return valid
    generator = torch.Generator().manual_seed(seed)
    keep = torch.randperm(total, generator=generator)[:size].sort().values
    return valid.clone_and_exchange_triples(valid.mapped_triples[keep])


def rank_metrics_filtered_and_raw(
    model: Any, triples: Any, filters: list[Any], *, batch_size: int, desc: str = "rank"
) -> tuple[dict[str, float], dict[str, float]]:
    """Filtered and raw rank metrics of ``triples`` (head and tail), from one scoring pass.

    PyKEEN's ``RankBasedEvaluator.evaluate`` scores every candidate once per evaluator, so
    filtered and raw metrics would cost two passes (7 min each for RotatE on the
    WN18RR-style KG on 2 CPU cores). This pass scores once and feeds PyKEEN's two
    evaluators, filtering with PyKEEN's own ``create_sparse_positive_filter_`` and
    ``filter_scores_`` against ``filters`` plus ``triples`` themselves (the filtered
    setting of Bordes et al. 2013, as ``evaluate(additional_filter_triples=...)`` does).

    Returns:
        ``(filtered, raw)`` metrics in :data:`METRIC_KEYS` names.
    """
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.evaluation.evaluator import create_sparse_positive_filter_, filter_scores_

    from ptm_core.progress import batch_starts

    filtered, raw = RankBasedEvaluator(filtered=True), RankBasedEvaluator(filtered=False)
    model.eval()
    mapped = triples.mapped_triples.to(model.device)
    known = torch.cat([mapped, *(f.mapped_triples.to(model.device) for f in filters)])
    sides: tuple[tuple[Literal["head", "tail"], int], ...] = (("head", 0), ("tail", 2))
    with torch.inference_mode():
        for first in batch_starts(len(mapped), batch_size, desc, unit="triple"):
            batch = mapped[first : first + batch_size]
            rows = torch.arange(batch.shape[0], device=batch.device)
            relation_filter = None
            for target, column in sides:
                scores = model.predict(batch, target=target)
                true = scores[rows, batch[:, column]].unsqueeze(-1)
                raw.process_scores_(batch, target, scores, true_scores=true)
                positives, relation_filter = create_sparse_positive_filter_(
                    batch, known, relation_filter=relation_filter, filter_col=column
                )
                scores = filter_scores_(scores, positives)
                scores[rows, batch[:, column]] = true.squeeze(-1)
                filtered.process_scores_(batch, target, scores, true_scores=true)
    return rank_metrics(filtered.finalize()), rank_metrics(raw.finalize())


def run_training(
    entity_ids: list[str],
    split: TripleSplit,
    model_cls: Any,
    settings: EmbeddingSettings,
    *,
    seed: int,
    device: str,
    model_kwargs: dict[str, Any],
    evaluate_baseline: bool,
) -> TrainingOutcome:
    """Train ``model_cls`` on ``split`` with ``settings``; see the module docstring."""
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.stoppers import EarlyStopper
    from pykeen.training import SLCWATrainingLoop
    from pykeen.training.callbacks import TrainingCallback

    target = resolve_device(device)
    fix_mmap_threshold()  # the rankings' score tensors would fragment the heap
    train, valid, test = _factories(entity_ids, split)
    kwargs = {
        "embedding_dim": settings.embedding_dim,
        "loss": settings.loss,
        "loss_kwargs": settings.loss_kwargs,
        **model_kwargs,
    }
    model = model_cls(triples_factory=train, random_seed=seed, **kwargs).to(target)
    width = settings.embedding_dim * (2 if model_cls.__name__ in ("RotatE", "ComplEx") else 1)
    eval_batch = evaluation_batch_size(len(entity_ids), width)
    baseline: dict[str, float] = {}
    if evaluate_baseline:  # the untrained model: what "learning" must beat
        untrained = model_cls(triples_factory=train, random_seed=seed + 1, **kwargs).to(target)
        baseline, _ = rank_metrics_filtered_and_raw(
            untrained, test, [train, valid], batch_size=eval_batch, desc="rank test (untrained)"
        )
        del untrained
    loop = SLCWATrainingLoop(
        model=model,
        triples_factory=train,
        optimizer="Adam",
        optimizer_kwargs={"lr": settings.learning_rate},
        negative_sampler="basic",
        negative_sampler_kwargs={"num_negs_per_pos": settings.num_negatives},
    )
    curve: list[dict[str, float]] = []
    losses: dict[int, float] = {}
    started = time.perf_counter()

    class _LossLog(TrainingCallback):
        def post_epoch(self, epoch: int, epoch_loss: float, **_: Any) -> None:
            losses[epoch] = float(epoch_loss)

    def _progress(_stopper: Any, mrr: float, epoch: int) -> None:
        seconds = time.perf_counter() - started
        loss = losses.get(epoch, float("nan"))
        curve.append({"epoch": epoch, "loss": loss, "valid_mrr": float(mrr), "seconds": seconds})
        logger.info(
            "%s epoch %d/%d  loss %.4f  valid MRR %.4f  %.0fs",
            settings.model,
            epoch,
            settings.num_epochs,
            loss,
            mrr,
            seconds,
        )

    stopping_valid = valid_subset(valid, settings.valid_sample, seed)
    with tempfile.TemporaryDirectory(prefix="ptm-kge-") as scratch:
        best_path = Path(scratch) / "best.pt"
        stopper = None
        if len(valid.mapped_triples):
            stopper = EarlyStopper(
                model=model,
                evaluator=RankBasedEvaluator(filtered=True),
                training_triples_factory=train,
                evaluation_triples_factory=stopping_valid,
                evaluation_batch_size=eval_batch,
                frequency=settings.eval_every,
                # patience 0: evaluate and log, never stop (PyKEEN needs >= 1 here).
                patience=settings.patience or settings.num_epochs + 1,
                metric="inverse_harmonic_mean_rank",
                relative_delta=RELATIVE_DELTA,
                result_callbacks=[_progress],
                best_model_path=best_path,
            )
        # PyKEEN runs gc.collect() every epoch; with torch (and spaCy) loaded that is ~0.6 s
        # per epoch. Freezing the existing heap makes each collection cheap.
        gc.freeze()
        try:
            loop.train(
                triples_factory=train,
                num_epochs=settings.num_epochs,
                batch_size=settings.batch_size,
                stopper=stopper,
                callbacks=[_LossLog()],
                use_tqdm=False,
                use_tqdm_batch=False,
            )
        finally:
            gc.unfreeze()
        stopped = bool(stopper is not None and stopper.stopped)
        # Ran every epoch without stopping: still hand back the best validated weights.
        if not stopped and best_path.is_file():
            model.load_state_dict(torch.load(best_path, weights_only=False))
    train_seconds = time.perf_counter() - started  # with the stopper's validations
    epochs_run = max(losses) if losses else 0
    best_epoch = stopper.best_epoch if stopper is not None else None
    filters = [train, valid]
    test_metrics, raw_metrics = rank_metrics_filtered_and_raw(
        model, test, filters, batch_size=eval_batch, desc="rank test"
    )
    valid_metrics = (
        rank_metrics_filtered_and_raw(
            model, valid, [train], batch_size=eval_batch, desc="rank valid"
        )[0]
        if len(valid.mapped_triples)
        else {}
    )
    seconds = time.perf_counter() - started
    with torch.no_grad():
        matrix = model.entity_representations[0](indices=None).detach().cpu()
    report: dict[str, Any] = {
        "valid": valid_metrics,
        "test_raw": raw_metrics,
        "num_valid": len(split.valid),
        "num_valid_for_stopping": len(stopping_valid.mapped_triples),
        "stopped_early": stopped,
        "epochs_run": epochs_run,
        "best_epoch": best_epoch,
        "settings": settings.as_dict(),
        "device": str(target),
        "threads": torch.get_num_threads(),
        "seconds": round(seconds, 1),
        "train_seconds": round(train_seconds, 1),
        "final_evaluation_seconds": round(seconds - train_seconds, 1),
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "curve": curve,
    }
    if target.type == "cuda":
        report["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated(target) / 2**20, 1)
    logger.info(
        "%s: %d epochs (%s), test filtered MRR %.4f, Hits@10 %.4f, %.0fs",
        settings.model,
        epochs_run,
        describe_stop(stopped, best_epoch),
        test_metrics["mrr"],
        test_metrics["hits_at_10"],
        seconds,
    )
    return TrainingOutcome(model, matrix, test_metrics, baseline, report)
