"""Text pre-training (BERT family) from a composed config: ``recipe: text``."""

from __future__ import annotations

import logging
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.checkpoints_hf.tokenizer_files import find_tokenizer_directory
from ptm_core.pretraining import PretrainResult, pretrain

logger = logging.getLogger(__name__)


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Instantiate the configured encoder, objectives and trainer, and pre-train.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config`.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    objectives = {name: instantiate(node) for name, node in cfg.objective.objectives.items()}
    weights = OmegaConf.to_container(cfg.objective.get("weights", {}), resolve=True)
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    if isinstance(trainer.adam_betas, list):
        trainer.adam_betas = tuple(trainer.adam_betas)
    prepared = data.get("prepared")
    init_from = cfg.get("init_from")
    tokenizer = None if prepared else data.tokenizer
    if init_from and tokenizer and find_tokenizer_directory(init_from) is not None:
        # The checkpoint's token table is indexed by its own tokenizer's ids: the data
        # preset's tokenizer (data.tokenizer has a default) would not fit it.
        logger.info(
            "init_from=%s has its own tokenizer; it replaces data.tokenizer=%s",
            init_from,
            tokenizer,
        )
        tokenizer = None
    return pretrain(
        None if prepared else data.corpus,
        prepared=prepared,
        encoder=instantiate(cfg.model),
        objectives=objectives,
        weights=weights,  # type: ignore[arg-type]
        trainer=trainer,
        tokenizer=tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        pack=data.get("pack", False),
        seed=cfg.seed,
        init_from=init_from,
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
    )
