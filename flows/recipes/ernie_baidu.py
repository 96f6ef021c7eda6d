"""ERNIE (Baidu) pre-training from a composed config: ``recipe: ernie_baidu``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.pretraining import PretrainResult
from ptm_knowledge.ernie import pretrain_ernie_baidu
from ptm_knowledge.linking import link_corpus_with_kg


def linked_corpus_for(cfg: DictConfig, output_dir: Path) -> Path:
    """The configured linked corpus, or the text corpus linked to ``data.kg`` now."""
    data = cfg.data
    if data.get("linked_corpus"):
        return Path(data.linked_corpus)
    options = OmegaConf.to_container(data.get("linker", {}), resolve=True)
    return link_corpus_with_kg(
        data.corpus,
        data.kg,
        output_dir / "linked_corpus.jsonl",
        **options,  # type: ignore[arg-type]
    )


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Link the corpus (unless a linked corpus is given), then pre-train with knowledge masking.

    The linked corpus is prepared once into memory-mapped shards (cached; see
    :func:`ptm_knowledge.ernie.open_linked_corpus`); ``data.prepared`` names a folder
    prepared earlier instead.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``configs/data/kg_sample.yaml``, ``objective`` as ``ernie_baidu.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    prepared = data.get("prepared")
    linked = None if prepared else linked_corpus_for(cfg, Path(trainer.output_dir))
    phrases = cfg.objective.get("phrases")
    return pretrain_ernie_baidu(
        linked,
        prepared=prepared,
        encoder=instantiate(cfg.model),
        trainer=trainer,
        tokenizer=data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
        schedule_fractions=tuple(cfg.objective.get("schedule_fractions", (1 / 3, 1 / 3, 1 / 3))),
        phrases=list(phrases) if phrases else None,
        objective=instantiate(cfg.objective.objectives.mlm),
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
    )
