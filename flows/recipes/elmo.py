"""ELMo biLM pre-training (ptm_classic.recurrent) from a composed config: ``recipe: elmo``."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_classic.recurrent.bilm import BiLM, BiLMConfig
from ptm_classic.recurrent.elmo_pretraining import ElmoPretrainResult, pretrain_elmo


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


def instantiate_for_check(cfg: DictConfig, vocab_size: int = 120) -> BiLM:
    """Build the configured biLM on the meta device (shapes only: no memory, no weights),
    as the config tests do for every preset; ``elmo_original`` builds in a second this way.

    Args:
        cfg: a composed config with ``recipe: elmo``.
        vocab_size: output words to build the softmax with.
    """
    config = instantiate(cfg.model, _convert_="all")(vocab_size=vocab_size)
    if not isinstance(config, BiLMConfig):
        raise TypeError(f"model config builds {type(config).__name__}, not a BiLMConfig")
    # normal_ on meta goes through torch's reference decompositions, whose first call
    # takes seconds; nothing is initialised on meta anyway.
    with torch.device("meta"), patch.object(torch.nn.init, "normal_", lambda t, *a, **k: t):
        return BiLM(config)
