"""VisualBERT pre-training from a composed config: ``recipe: visualbert``."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.objectives.inputs import build_objective
from ptm_multimodal.pretraining import MultimodalPretrainResult, pretrain_multimodal


def run(cfg: DictConfig, **trainer_overrides: Any) -> MultimodalPretrainResult:
    """Instantiate the configured model factory, objectives and trainer, and pre-train.

    The model factory is called with the data's ``vocab_size``, ``visual_embedding_dim``
    and ``feature_spec``; each objective factory by ``build_objective`` from the model.
    Serves ``recipe: vilbert`` too (same data side, different model and objectives).

    Args:
        cfg: a config composed by :func:`flows.config.compose_config`.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    objectives = {name: instantiate(node) for name, node in cfg.objective.objectives.items()}
    weights = OmegaConf.to_container(cfg.objective.get("weights", {}), resolve=True)
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    synthetic_node = data.get("synthetic")
    synthetic = (
        {} if synthetic_node is None else OmegaConf.to_container(synthetic_node, resolve=True)
    )
    extraction_node = data.get("extraction")
    extraction = (
        None if extraction_node is None else OmegaConf.to_container(extraction_node, resolve=True)
    )
    return pretrain_multimodal(
        model=instantiate(cfg.model),
        objectives=objectives,
        weights=weights,  # type: ignore[arg-type]
        trainer=trainer,
        train_dir=data.get("train_dir"),
        eval_dir=data.get("eval_dir"),
        synthetic=synthetic,  # type: ignore[arg-type]
        batch_size=data.batch_size,
        max_length=data.max_length,
        negative_prob=data.negative_prob,
        seed=cfg.seed,
        prepare=data.get("prepare", True),
        cache_dir=data.get("cache_dir"),
        extraction=extraction,  # type: ignore[arg-type]
        num_workers=data.get("num_workers", 0),
    )


def instantiate_for_check(cfg: DictConfig, vocab: Any, visual_embedding_dim: int = 32) -> Any:
    """Build the configured model and objectives without data (for config tests).

    Returns:
        ``(model, {name: objective})``; the model gets ``vocab.vocab_size`` ids and
        ``visual_embedding_dim``-d features.
    """
    model = instantiate(cfg.model)(
        vocab_size=vocab.vocab_size, visual_embedding_dim=visual_embedding_dim
    )
    objectives = {
        name: build_objective(instantiate(node), model, vocab)
        for name, node in cfg.objective.objectives.items()
    }
    return model, objectives
