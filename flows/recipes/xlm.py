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
    directions = data.get("directions")
    # data.prepared (a prepare_xlm folder) replaces the raw corpora and their tokenizer.
    prepared = data.get("prepared")
    return pretrain_xlm(
        encoder=instantiate(cfg.model),
        objectives=objectives,
        trainer=trainer,
        monolingual=None if prepared else data.corpus,
        parallel=None if prepared else data.get("parallel"),
        evaluation_parallel=data.get("evaluation_parallel"),
        tokenizer=None if prepared else data.get("tokenizer"),
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
        prepared=prepared,
        cache_dir=data.get("cache_dir"),
        tokenizer_sample=data.get("tokenizer_sample"),
    )
