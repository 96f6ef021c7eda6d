"""XLM pre-training (MLM and TLM, ptm-multilingual) from a composed config: ``recipe: xlm``."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_multilingual import XLMPretrainResult, pretrain_xlm


def run(cfg: DictConfig, **trainer_overrides: Any) -> XLMPretrainResult:
    """Instantiate the configured text stack, objectives and trainer, and pre-train XLM.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``configs/data/xlm_sample.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    objectives = {name: instantiate(node) for name, node in cfg.objective.objectives.items()}
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    if isinstance(trainer.adam_betas, list):
        trainer.adam_betas = tuple(trainer.adam_betas)
    directions = data.get("directions")
    return pretrain_xlm(
        encoder=instantiate(cfg.model),
        objectives=objectives,
        trainer=trainer,
        monolingual=data.corpus,
        parallel=data.get("parallel"),
        evaluation_parallel=data.get("evaluation_parallel"),
        tokenizer=data.get("tokenizer"),
        vocab_size=data.vocab_size,
        vocab_alpha=data.vocab_alpha,
        lowercase=data.lowercase,
        alpha=data.alpha,
        stream_length=data.stream_length,
        max_length=data.max_length,
        batch_size=data.batch_size,
        mlm_steps=data.mlm_steps,
        tlm_steps=data.tlm_steps,
        directions=list(OmegaConf.to_container(directions)) if directions else None,  # type: ignore[arg-type]
        batches_per_epoch=data.batches_per_epoch,
        seed=cfg.seed,
    )
