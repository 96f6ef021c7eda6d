"""KEPLER pre-training from a composed config: ``recipe: kepler``.

One encoder trained on MLM over ``data.corpus`` and on the KE loss over ``data.kg``
(entity embeddings = ``[CLS]`` of each entity's description), then link prediction on the
held-out triples with PyKEEN's filtered rank metrics (``link_prediction/mrr``,
``link_prediction/hits_at_<k>`` in the final metrics, next to the random-ranking
baseline).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_knowledge.kepler import KeplerResult, pretrain_kepler


def run(
    cfg: DictConfig,
    *,
    split: tuple[np.ndarray, np.ndarray] | None = None,
    candidates: torch.Tensor | None = None,
    **trainer_overrides: Any,
) -> KeplerResult:
    """Pre-train KEPLER and evaluate link prediction.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``kg_sample.yaml``, ``objective`` as ``kepler.yaml``, a ``kepler`` block as in
            ``experiment/kepler_tiny.yaml``).
        split: ``(train, test)`` index triples instead of ``kepler.test_fraction``'s split
            (the benchmark passes PyKEEN's).
        candidates: entity indices to rank among (default all).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    kepler = cfg.kepler
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    prepared = data.get("prepared")
    objective = cfg.objective
    given = OmegaConf.to_container(objective.get("weights", {}), resolve=True)
    assert isinstance(given, dict)
    weights = {str(name): float(value) for name, value in given.items()}
    return pretrain_kepler(
        None if prepared else data.corpus,
        prepared=prepared,
        kg=data.kg,
        encoder=instantiate(cfg.model),
        objectives={n: instantiate(node) for n, node in objective.objectives.items()},
        weights=weights,
        trainer=trainer,
        tokenizer=None if prepared else data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
        ke_batch_size=kepler.ke_batch_size,
        num_negatives=kepler.num_negatives,
        margin=kepler.margin,
        p_norm=kepler.p_norm,
        ke_weight=kepler.get("ke_weight", 1.0),
        description_max_length=kepler.description_max_length,
        allow_missing_descriptions=kepler.get("allow_missing_descriptions", True),
        test_fraction=kepler.test_fraction,
        split=split,
        candidates=candidates,
        eval_batch_size=kepler.get("eval_batch_size", 256),
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
    )
