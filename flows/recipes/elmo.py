"""ELMo biLM pre-training (ptm_core.recurrent) from a composed config: ``recipe: elmo``."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_core.recurrent.elmo_pretraining import ElmoPretrainResult, pretrain_elmo


def run(cfg: DictConfig, **trainer_overrides: Any) -> ElmoPretrainResult:
    """Instantiate the biLM config factory and trainer, and pre-train ELMo's biLM.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``model`` as
            ``configs/model/elmo_tiny.yaml``; ``data`` with ``corpus``, ``batch_size`` and
            the word-level keys of ``configs/experiment/elmo_tiny.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    if isinstance(trainer.adam_betas, list):
        trainer.adam_betas = tuple(trainer.adam_betas)
    return pretrain_elmo(
        data.corpus,
        model=instantiate(cfg.model, _convert_="all"),
        trainer=trainer,
        vocab_top_k=data.get("vocab_top_k", 50000),
        min_count=data.get("min_count", 1),
        max_length=data.get("max_words", 64),
        lowercase=data.get("word_lowercase", False),
        batch_size=data.batch_size,
        heldout_every=data.get("heldout_every", 20),
        seed=cfg.seed,
        num_workers=data.get("num_workers", 0),
        word_corpus_dir=data.get("word_corpus_dir"),
    )
