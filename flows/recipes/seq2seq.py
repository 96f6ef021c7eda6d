"""Sequence-to-sequence pre-training (BART, T5, MASS) from a composed config: ``recipe: seq2seq``.

The model group names an encoder-decoder builder (``ptm_core.encoders.build_encoder_decoder``);
the objective group holds exactly one sequence-to-sequence objective.
"""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_core.pretraining import PretrainResult
from ptm_core.seq2seq_pretraining import build_model, pretrain_seq2seq


def _objective_node(cfg: DictConfig) -> Any:
    nodes = list(cfg.objective.objectives.items())
    if len(nodes) != 1:
        raise ValueError(
            f"recipe seq2seq trains one objective; objective.objectives has "
            f"{[name for name, _ in nodes]}. Keep one (bart, t5 or mass)"
        )
    return nodes[0][1]


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Instantiate the configured encoder-decoder, objective and trainer, and pre-train."""
    data = cfg.data
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    prepared = data.get("prepared")
    return pretrain_seq2seq(
        None if prepared else data.corpus,
        prepared=prepared,
        model=instantiate(cfg.model),
        objective=instantiate(_objective_node(cfg)),
        trainer=trainer,
        cache_dir=data.get("cache_dir"),
        tokenizer=None if prepared else data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
    )


def instantiate_for_check(cfg: DictConfig, vocab: Any) -> Any:
    """Build the configured model and objective without data (for config tests).

    Returns:
        ``(model, {name: objective})``.
    """
    objectives = {
        name: instantiate(node)(vocab=vocab, max_length=cfg.data.max_length)
        for name, node in cfg.objective.objectives.items()
    }
    model = build_model(instantiate(cfg.model), vocab, next(iter(objectives.values())))
    return model, objectives
