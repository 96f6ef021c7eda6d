"""Knowledge-graph embeddings (TransE and any other PyKEEN model) trained through PyKEEN.

No embedding model is written here: :func:`train_kg_embeddings` hands our triples to
``pykeen.pipeline.pipeline`` and reads back PyKEEN's rank-based metrics and the entity
representation matrix, re-keyed by our entity ids.
"""

from __future__ import annotations

import gc
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ptm_core.atomic import atomic_directory
from ptm_core.model_kinds import KIND_KEY
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.kinds import KG_EMBEDDINGS

logger = logging.getLogger(__name__)

EMBEDDINGS_FILE = "entity_embeddings.safetensors"
IDS_FILE = "entity_ids.json"
METRICS_FILE = "metrics.json"
TENSOR_NAME = "entity_embeddings"
# PyKEEN's names of the metrics we report (both head and tail prediction, realistic ranks).
METRIC_KEYS = {
    "mrr": "both.realistic.inverse_harmonic_mean_rank",
    "hits_at_1": "both.realistic.hits_at_1",
    "hits_at_10": "both.realistic.hits_at_10",
    "mean_rank": "both.realistic.arithmetic_mean_rank",
}


@dataclass
class KGEmbeddingResult:
    """What :func:`train_kg_embeddings` returns.

    Attributes:
        entity_ids: our ids, in the row order of ``embeddings``.
        embeddings: ``(num_entities, dim)`` float32 entity vectors (detached, CPU).
        metrics: rank-based metrics on the held-out test split (``mrr``, ``hits_at_1``,
            ``hits_at_10``, ``mean_rank``).
        baseline_metrics: the same metrics for an untrained (random-embedding) model of the
            same class and size, on the same split.
        model_name: the PyKEEN model name.
        num_train, num_test: triples in each split.
        pykeen_model: the trained PyKEEN model (not saved).
        pykeen_entity_to_id: PyKEEN's row of each entity id in ``pykeen_model``.
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
            },
        )


def _rank_metrics(results: Any) -> dict[str, float]:
    return {name: float(results.get_metric(key)) for name, key in METRIC_KEYS.items()}


def _run_pipeline(
    pipeline: Any,
    train: Any,
    test: Any,
    model_cls: Any,
    kwargs: dict[str, Any],
    learning_rate: float,
    num_epochs: int,
    batch_size: int,
    training_kwargs: dict[str, Any] | None,
    seed: int,
) -> Any:
    return pipeline(
        training=train,
        testing=test,
        model=model_cls,
        model_kwargs=kwargs,
        optimizer="Adam",
        optimizer_kwargs={"lr": learning_rate},
        training_kwargs={
            "num_epochs": num_epochs,
            "batch_size": batch_size,
            "use_tqdm": False,
            **(training_kwargs or {}),
        },
        evaluation_kwargs={"use_tqdm": False, "batch_size": 256},
        random_seed=seed,
        device="cpu",
    )


def check_embedding_settings(
    *,
    embedding_dim: int = 32,
    num_epochs: int = 100,
    batch_size: int = 64,
    learning_rate: float = 0.01,
) -> None:
    """Fail on a setting out of range before the graph is read or PyKEEN starts.

    Args:
        embedding_dim: Embedding width.
        num_epochs: Training epochs.
        batch_size: Training batch size.
        learning_rate: Adam learning rate.

    Raises:
        ValueError: One line naming the setting (and its ``ptm embed-kg`` flag) and its range.
    """
    for name, flag, value in (
        ("embedding_dim", "--dim", embedding_dim),
        ("num_epochs", "--epochs", num_epochs),
        ("batch_size", None, batch_size),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            where = f"{name} ({flag})" if flag else name
            raise ValueError(f"{where} is {value!r}; it must be a whole number of at least 1")
    if not isinstance(learning_rate, int | float) or not 0 < learning_rate < float("inf"):
        raise ValueError(f"learning_rate is {learning_rate!r}; it must be a finite number above 0")


def train_kg_embeddings(
    kg: KnowledgeGraph,
    *,
    model: str = "TransE",
    embedding_dim: int = 32,
    num_epochs: int = 100,
    batch_size: int = 64,
    learning_rate: float = 0.01,
    split: tuple[float, float] = (0.9, 0.1),
    seed: int = 0,
    model_kwargs: dict[str, Any] | None = None,
    training_kwargs: dict[str, Any] | None = None,
    evaluate_baseline: bool = True,
) -> KGEmbeddingResult:
    """Train a PyKEEN model on the graph's triples and evaluate on a held-out split.

    TransE (Bordes et al., 2013, "Translating Embeddings for Modeling Multi-relational
    Data") is the default, as in ERNIE (Zhang et al., 2019); any name that
    ``pykeen.models`` knows works (``"DistMult"``, ``"RotatE"``, ...). Embeddings of every
    entity of the table are returned, in table order; an entity that occurs in no training
    triple keeps its random initial vector (PyKEEN only knows entities of the triples).

    Args:
        kg: the knowledge graph (``kg.triples`` must not be empty).
        model: a PyKEEN model name.
        embedding_dim: entity (and relation) embedding width.
        num_epochs: training epochs (PyKEEN's sLCWA loop with negative sampling).
        batch_size: training batch size.
        learning_rate: Adam learning rate.
        split: train and test fractions of the triples; PyKEEN's splitter keeps every
            entity of the test split in the training split.
        seed: seed of the split, initialisation and negative sampling.
        model_kwargs: extra keyword arguments for the model.
        training_kwargs: extra keyword arguments for the training loop.
        evaluate_baseline: also evaluate an untrained model (random embeddings).

    Returns:
        :class:`KGEmbeddingResult`.

    Raises:
        ValueError: no triples, or an unknown model name (listing valid ones).
    """
    check_embedding_settings(
        embedding_dim=embedding_dim,
        num_epochs=num_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
    )
    from pykeen.evaluation import RankBasedEvaluator
    from pykeen.models import model_resolver
    from pykeen.pipeline import pipeline
    from pykeen.triples import TriplesFactory

    if not kg.triples:
        raise ValueError("the knowledge graph has no triples; load it with a triples.tsv file")
    try:
        model_cls = model_resolver.lookup(model)
    except (KeyError, ValueError):
        valid = ", ".join(sorted(c.__name__ for c in model_resolver.lookup_dict.values()))
        raise ValueError(f"unknown PyKEEN model {model!r}; valid names: {valid}") from None
    labeled = kg.labeled_triples()
    import numpy as np

    factory = TriplesFactory.from_labeled_triples(np.array(labeled, dtype=str))
    train, test = factory.split(list(split), random_state=seed)
    kwargs = {"embedding_dim": embedding_dim, **(model_kwargs or {})}
    # PyKEEN runs gc.collect() every epoch; with torch and spaCy loaded that is ~0.6 s per
    # epoch here. Freezing the existing heap makes each collection cheap.
    gc.freeze()
    try:
        result = _run_pipeline(
            pipeline,
            train,
            test,
            model_cls,
            kwargs,
            learning_rate,
            num_epochs,
            batch_size,
            training_kwargs,
            seed,
        )
    finally:
        gc.unfreeze()
    metrics = _rank_metrics(result.metric_results)
    baseline: dict[str, float] = {}
    if evaluate_baseline:
        untrained = model_cls(triples_factory=train, random_seed=seed + 1, **kwargs)
        baseline = _rank_metrics(
            RankBasedEvaluator().evaluate(
                untrained,
                test.mapped_triples,
                additional_filter_triples=[train.mapped_triples],
                use_tqdm=False,
                batch_size=256,
            )
        )
    trained = result.model
    with torch.no_grad():
        matrix = trained.entity_representations[0](indices=None).detach().cpu()
    # RotatE, ComplEx: real and imaginary parts side by side (width 2 * dim); .float() on
    # the complex tensor would silently drop the imaginary half.
    if matrix.is_complex():
        matrix = torch.cat([matrix.real, matrix.imag], dim=1)
    matrix = matrix.float()
    # Re-key PyKEEN's row order (its entity_to_id) by the table order.
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(len(kg), matrix.shape[1], generator=generator) * matrix.std()
    for entity_id, row in train.entity_to_id.items():
        embeddings[kg.index[entity_id]] = matrix[row]
    logger.info("%s: test %s, random baseline %s", model, metrics, baseline)
    return KGEmbeddingResult(
        entity_ids=kg.entity_ids,
        embeddings=embeddings.contiguous(),
        metrics=metrics,
        baseline_metrics=baseline,
        model_name=model_cls.__name__,
        num_train=train.num_triples,
        num_test=test.num_triples,
        pykeen_model=trained,
        pykeen_entity_to_id=dict(train.entity_to_id),
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
