"""AWD-LSTM language-model pre-training (ULMFiT stage 1) from a composed config:
``recipe: awd_lstm`` (``ptm pretrain experiment=awd_lstm_tiny``)."""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_classic.recurrent.awd_lstm import AWDLSTMLanguageModel
from ptm_classic.recurrent.awd_lstm_pretrain import pretrain_awd_lstm
from ptm_core.pretraining import PretrainResult
from ptm_core.tokenization import VocabInfo


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Build the AWD-LSTM config and trainer from ``cfg`` and pre-train the language model.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``model`` as
            ``configs/model/awd_lstm_tiny.yaml``, ``data`` as ``configs/data/sample_corpus.yaml``
            plus ``bptt``, ``variable_length``, ``valid_fraction``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    prepared = data.get("prepared")
    return pretrain_awd_lstm(
        None if prepared else data.corpus,
        prepared=prepared,
        model=instantiate(cfg.model),
        trainer=trainer,
        tokenizer=None if prepared else data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        batch_size=data.batch_size,
        bptt=data.get("bptt", 70),
        variable_length=bool(data.get("variable_length", True)),
        valid_fraction=float(data.get("valid_fraction", 0.05)),
        seed=cfg.seed,
        cache_dir=data.get("cache_dir"),
    )


def instantiate_for_check(cfg: DictConfig, vocab: VocabInfo) -> AWDLSTMLanguageModel:
    """Build the configured language model for ``vocab`` without training (config tests)."""
    return AWDLSTMLanguageModel(instantiate(cfg.model)(vocab_size=vocab.vocab_size))
