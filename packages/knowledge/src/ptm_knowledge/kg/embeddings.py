"""Knowledge-graph embeddings (TransE, RotatE, ComplEx, DistMult, any PyKEEN model).

No embedding model, loss or evaluator is written here: :func:`train_kg_embeddings` builds
PyKEEN's model, sLCWA training loop (basic negative sampler), ``EarlyStopper`` on
validation MRR and filtered ``RankBasedEvaluator``, and reads back the metrics and the
entity representation matrix, re-keyed by our entity ids. Settings:
:mod:`ptm_knowledge.kg.embedding_settings`; splits: :mod:`ptm_knowledge.kg.embedding_splits`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ptm_core.atomic import atomic_directory
from ptm_core.model_kinds import KIND_KEY
from ptm_knowledge.kg.embedding_settings import resolve_settings
from ptm_knowledge.kg.embedding_splits import TripleSplit
from ptm_knowledge.kg.embedding_training import run_training
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.kinds import KG_EMBEDDINGS

logger = logging.getLogger(__name__)

EMBEDDINGS_FILE = "entity_embeddings.safetensors"
IDS_FILE = "entity_ids.json"
METRICS_FILE = "metrics.json"
TENSOR_NAME = "entity_embeddings"


@dataclass
class KGEmbeddingResult:
    """What :func:`train_kg_embeddings` returns.

    Attributes:
        entity_ids: our ids, in the row order of ``embeddings``.
        embeddings: ``(num_entities, dim)`` float32 entity vectors (detached, CPU; complex
            models: real and imaginary halves side by side, width ``2 * dim``).
        metrics: filtered rank-based metrics on the test split (``mrr``, ``hits_at_1``,
            ``hits_at_3``, ``hits_at_10``, ``mean_rank``).
        baseline_metrics: the same metrics for an untrained model of the same class and size.
        model_name: the PyKEEN model name.
        num_train, num_test: triples in each split.
        pykeen_model: the trained PyKEEN model (not saved).
        pykeen_entity_to_id: PyKEEN's row of each entity id in ``pykeen_model``.
        report: everything else metrics.json holds (valid metrics, raw test metrics, the
            stopping epoch, the settings, time, peak memory, the learning curve).
    """

    entity_ids: list[str]
    embeddings: torch.Tensor
    metrics: dict[str, float]
    baseline_metrics: dict[str, float] = field(default_factory=dict)
    model_name: str = "TransE"
    num_train: int = 0
    num_test: int = 0
    pykeen_model: Any = None
    pykeen_entity_to_id: dict[str, int] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The saved tensors by name (as a module's, for round-trip checks)."""
        return {TENSOR_NAME: self.embeddings}

    def save(self, directory: str | Path) -> Path:
        """Write embeddings (safetensors), id order and metrics atomically; returns the dir."""
        return save_entity_embeddings(
            directory,
            self.entity_ids,
            self.embeddings,
            metrics={
                "model": self.model_name,
                "test": self.metrics,
                "random_baseline": self.baseline_metrics,
                "num_train": self.num_train,
                "num_test": self.num_test,
                **self.report,
            },
        )


def check_embedding_settings(
    *,
    embedding_dim: int | None = None,
    num_epochs: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    **more: Any,
) -> None:
    """Fail on a setting out of range before the graph is read or PyKEEN starts.

    Args:
        embedding_dim: as :func:`train_kg_embeddings` (``None``: the preset's).
        num_epochs: likewise.
        batch_size: likewise.
        learning_rate: likewise.
        **more: any other setting of :data:`~ptm_knowledge.kg.embedding_settings.PRESETS`,
            and ``preset``.

    Raises:
        ValueError: One line naming the setting (and its ``ptm embed-kg`` flag) and its range.
    """
    preset = more.pop("preset", "auto")
    resolve_settings(
        preset=preset,
        embedding_dim=embedding_dim,
        num_epochs=num_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        **more,
    )


def train_kg_embeddings(
    kg: KnowledgeGraph,
    *,
    model: str = "TransE",
    preset: str = "auto",
    embedding_dim: int | None = None,
    num_epochs: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    num_negatives: int | None = None,
    eval_every: int | None = None,
    patience: int | None = None,
    valid_sample: int | None = None,
    split: TripleSplit | tuple[float, float, float] = (0.8, 0.1, 0.1),
    seed: int = 0,
    device: str = "auto",
    threads: int | None = None,
    model_kwargs: dict[str, Any] | None = None,
    evaluate_baseline: bool = True,
) -> KGEmbeddingResult:
    """Train a PyKEEN model on the graph's triples, stop early on validation MRR, evaluate.

    TransE (Bordes et al., 2013) is the default, as in ERNIE (Zhang et al., 2019); RotatE,
    ComplEx and DistMult have tuned losses too (:mod:`~ptm_knowledge.kg.embedding_settings`),
    and any other ``pykeen.models`` name works with TransE's. Every entity of the table is
    known to PyKEEN (an entity in no training triple is trained only as a negative), and
    the embeddings come back in table order.

    Args:
        kg: the knowledge graph.
        model: a PyKEEN model name.
        preset: ``auto`` (by entity count), ``small``, ``medium`` or ``large``; the
            explicit settings below (not ``None``) override it.
        embedding_dim: entity width; this and the next seven override the preset (see
            :class:`~ptm_knowledge.kg.embedding_settings.EmbeddingSettings`).
        num_epochs: most epochs.
        batch_size: positive triples per step.
        learning_rate: Adam's.
        num_negatives: negatives per positive.
        eval_every: epochs between validation evaluations.
        patience: evaluations without gain before stopping (0: never).
        valid_sample: validation triples per early-stopping evaluation (0: all).
        split: a :class:`TripleSplit` (e.g. :func:`read_kg_split` of a pre-split folder),
            or train/valid/test fractions of ``kg.triples`` to carve one.
        seed: seed of the carved split, initialisation and negative sampling.
        device: ``auto`` (CUDA when present), ``cpu``, ``cuda``, ``cuda:1``...
        threads: CPU threads for torch (``None``: torch's default).
        model_kwargs: extra keyword arguments for the model.
        evaluate_baseline: also evaluate an untrained model (random embeddings).

    Returns:
        :class:`KGEmbeddingResult`.

    Raises:
        ValueError: no triples, a bad setting (naming its flag), or an unknown model name
            (listing valid ones).
    """
    from pykeen.models import model_resolver

    try:
        model_cls = model_resolver.lookup(model)
    except (KeyError, ValueError):
        valid = ", ".join(sorted(c.__name__ for c in model_resolver.lookup_dict.values()))
        raise ValueError(
            f"unknown PyKEEN model {model!r} (--model); valid names: {valid}"
        ) from None
    settings = resolve_settings(
        model=model_cls.__name__,
        preset=preset,
        num_entities=len(kg),
        embedding_dim=embedding_dim,
        num_epochs=num_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        num_negatives=num_negatives,
        eval_every=eval_every,
        patience=patience,
        valid_sample=valid_sample,
    )
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise ValueError(
            f"threads (--threads) is {threads!r}; it must be a whole number of at least 1"
        )
    if not isinstance(split, TripleSplit):
        if not len(kg.triples):
            raise ValueError("the knowledge graph has no triples; load it with a triples.tsv file")
        from ptm_knowledge.kg.embedding_splits import carve_split

        split = carve_split(kg, split, seed)
    if threads is not None:
        torch.set_num_threads(threads)
    outcome = run_training(
        kg.entity_ids,
        split,
        model_cls,
        settings,
        seed=seed,
        device=device,
        model_kwargs=model_kwargs or {},
        evaluate_baseline=evaluate_baseline,
    )
    matrix = outcome.entity_matrix
    # RotatE, ComplEx: real and imaginary parts side by side (width 2 * dim); .float() on
    # the complex tensor would silently drop the imaginary half.
    if matrix.is_complex():
        matrix = torch.cat([matrix.real, matrix.imag], dim=1)
    return KGEmbeddingResult(
        entity_ids=kg.entity_ids,
        embeddings=matrix.float().contiguous(),
        metrics=outcome.test,
        baseline_metrics=outcome.baseline,
        model_name=model_cls.__name__,
        num_train=len(split.train),
        num_test=len(split.test),
        pykeen_model=outcome.model,
        pykeen_entity_to_id={e: i for i, e in enumerate(kg.entity_ids)},
        report={**outcome.report, "split": split.source},
    )


def save_entity_embeddings(
    directory: str | Path,
    entity_ids: list[str],
    embeddings: torch.Tensor,
    *,
    metrics: dict[str, Any] | None = None,
) -> Path:
    """Write ``entity_embeddings.safetensors`` + ``entity_ids.json`` (+ ``metrics.json``)
    and ``config.json``, which names the folder's kind (``"ptm_model": "kg_embeddings"``)
    as every ptm model folder does.

    The id order is stored twice: in ``entity_ids.json`` and in the safetensors metadata,
    so the weights file alone is self-describing.
    """
    if embeddings.shape[0] != len(entity_ids):
        raise ValueError(
            f"{embeddings.shape[0]} embedding rows for {len(entity_ids)} entity ids; "
            "give one row per id"
        )
    with atomic_directory(directory, kind="kg-embeddings") as tmp:
        tmp = Path(tmp)
        save_file(
            {TENSOR_NAME: embeddings.detach().float().cpu().contiguous()},
            str(tmp / EMBEDDINGS_FILE),
            metadata={"entity_ids": json.dumps(entity_ids)},
        )
        (tmp / IDS_FILE).write_text(json.dumps(entity_ids, indent=0) + "\n")
        config = {
            KIND_KEY: KG_EMBEDDINGS,
            "num_entities": len(entity_ids),
            "embedding_dim": int(embeddings.shape[1]),
        }
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if metrics is not None:
            (tmp / METRICS_FILE).write_text(json.dumps(metrics, indent=2) + "\n")
    return Path(directory)


def load_entity_embeddings(directory: str | Path) -> tuple[list[str], torch.Tensor]:
    """Read what :func:`save_entity_embeddings` wrote: ``(entity_ids, (N, dim) tensor)``."""
    directory = Path(directory)
    path = directory / EMBEDDINGS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no entity embeddings; train them with train_kg_embeddings(...).save(dir)"
        )
    tensor = load_file(str(path))[TENSOR_NAME]
    ids = json.loads((directory / IDS_FILE).read_text())
    if len(ids) != tensor.shape[0]:
        raise ValueError(f"{directory}: {len(ids)} ids but {tensor.shape[0]} embedding rows")
    return ids, tensor


def load_kg_embeddings(directory: str | Path) -> KGEmbeddingResult:
    """A ``ptm embed-kg`` folder as the :class:`KGEmbeddingResult` that wrote it (the
    ``kg_embeddings`` family's ``load``; no PyKEEN model: it is not saved)."""
    entity_ids, embeddings = load_entity_embeddings(directory)
    path = Path(directory) / METRICS_FILE
    metrics = json.loads(path.read_text()) if path.is_file() else {}
    return KGEmbeddingResult(
        entity_ids=entity_ids,
        embeddings=embeddings,
        metrics=dict(metrics.get("test", {})),
        baseline_metrics=dict(metrics.get("random_baseline", {})),
        model_name=str(metrics.get("model", "TransE")),
        num_train=int(metrics.get("num_train", 0)),
        num_test=int(metrics.get("num_test", 0)),
    )


def save_kg_embeddings(result: KGEmbeddingResult, directory: str | Path) -> Path:
    """Write ``result`` (the ``kg_embeddings`` family's ``save``): :meth:`KGEmbeddingResult.save`."""
    return result.save(directory)
