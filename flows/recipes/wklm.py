"""WKLM pre-training from a composed config: ``recipe: wklm``.

Steps: link the corpus to the KG (unless ``data.linked_corpus`` or ``data.prepared`` is
given; the linked corpus is prepared once into memory-mapped shards, cached, shared with
the ERNIE recipes), then train replaced-entity detection + 5% MLM.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.pretraining import PretrainResult
from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.linking.corpus import linked_corpus_for
from ptm_knowledge.wklm import pretrain_wklm


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Link (if needed), then pre-train WKLM.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``kg_sample.yaml``, ``objective`` as ``wklm.yaml``, a ``wklm`` block as in
            ``experiment/wklm_tiny.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    options = cfg.get("wklm", {})
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    output_dir = Path(trainer.output_dir)
    prepared = data.get("prepared")
    linked = None if prepared else linked_corpus_for(cfg.data, output_dir)
    init_from = cfg.get("init_from")
    return pretrain_wklm(
        linked,
        prepared=prepared,
        kg=load_knowledge_graph(data.kg),
        kg_source=data.kg,
        encoder=init_from if init_from else instantiate(cfg.model),
        trainer=trainer,
        tokenizer=data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
        replace_prob=float(options.get("replace_prob", 0.5)),
        dynamic=bool(options.get("dynamic", False)),
        aliases=bool(options.get("aliases", False)),
        untyped=str(options.get("untyped", "keep")),
        objectives={n: instantiate(node) for n, node in cfg.objective.objectives.items()},
        weights=OmegaConf.to_container(cfg.objective.get("weights", {}), resolve=True),  # type: ignore[arg-type]
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
    )
