"""ERNIE (Tsinghua) pre-training from a composed config: ``recipe: ernie_thu``.

Steps: link the corpus to the KG (unless ``data.linked_corpus`` or ``data.prepared`` is
given; the linked corpus is prepared once into memory-mapped shards, cached), train KG
embeddings with PyKEEN (saved to ``<output_dir>/kg_embeddings``; skipped when
``knowledge.embeddings_dir`` points at embeddings made earlier), then MLM + NSP + dEA.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from flows.recipes.ernie_baidu import linked_corpus_for
from ptm_core.pretraining import PretrainResult
from ptm_knowledge.ernie import open_linked_corpus, pretrain_ernie_thu
from ptm_knowledge.kg import load_entity_embeddings, load_knowledge_graph, train_kg_embeddings


def _linked_against(
    cfg: DictConfig,
    linked: Path | None,
    output_dir: Path,
    entity_ids: Sequence[str],
    kg: str | Path,
) -> None:
    """Fail before embedding the KG if none of the corpus's mentions is an entity of ``kg``
    (it was linked against another KG: TransE on a large KG takes an hour, and the run
    would then train dEA on nothing). The corpus is prepared here (cached, as the training
    step opens it) and only its per-shard entity tables are read."""
    data = cfg.data
    store, _ = open_linked_corpus(
        linked,
        data.get("prepared"),
        output_dir=output_dir,
        tokenizer=data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.get("cache_dir"),
    )
    known = set(entity_ids)
    mentions = hits = 0
    for table in store.entity_tables():
        for entity, count in zip(table["ids"], table["counts"], strict=True):
            mentions += count
            hits += count if entity in known else 0
    if mentions and not hits:
        source = linked if linked is not None else data.get("prepared")
        raise ValueError(
            f"0 of {mentions:,} linked mentions of {source} are entities of data.kg={kg}: the "
            "linked corpus was linked against another KG; set data.kg to that KG, or link "
            f"the corpus again with ptm link --kg {kg}"
        )


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Run the three ERNIE-THU steps.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config` (``data`` as
            ``kg_sample.yaml``, ``objective`` as ``ernie_thu.yaml``, a ``knowledge`` block
            as in ``experiment/ernie_thu_tiny.yaml``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data = cfg.data
    knowledge = cfg.knowledge
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    output_dir = Path(trainer.output_dir)
    prepared = data.get("prepared")
    linked = None if prepared else linked_corpus_for(cfg, output_dir)
    precomputed = knowledge.get("embeddings_dir")
    known_entities: set[str] | None = None
    if precomputed:  # e.g. from the embed_knowledge_graph flow
        entity_ids, vectors = load_entity_embeddings(precomputed)
        entity_source = str(precomputed)
    else:
        kg = load_knowledge_graph(data.kg)
        if data.get("linked_corpus") or prepared:
            _linked_against(cfg, linked, output_dir, kg.entity_ids, data.kg)
        # Every mention must name an entity of data.kg (else file:line of the first one).
        known_entities = set(kg.entity_ids)
        kg_options = OmegaConf.to_container(knowledge.get("kg_embeddings", {}), resolve=True)
        trained = train_kg_embeddings(
            kg,
            seed=cfg.seed,
            **kg_options,  # type: ignore[arg-type]
        )
        trained.save(output_dir / "kg_embeddings")
        entity_ids, vectors = trained.entity_ids, trained.embeddings
        # Named in the error when a given linked corpus was linked against another KG
        # (data.linked_corpus set, data.kg left at the sample KG).
        entity_source = f"{output_dir / 'kg_embeddings'}, trained here on data.kg={data.kg}"
    objective = cfg.objective
    weights = {
        **OmegaConf.to_container(objective.get("weights", {}), resolve=True),  # type: ignore[dict-item]
        **OmegaConf.to_container(objective.get("entity_weights", {}), resolve=True),  # type: ignore[dict-item]
    }
    init_from = knowledge.get("init_from")
    return pretrain_ernie_thu(
        linked,
        prepared=prepared,
        entity_ids=entity_ids,
        entity_embeddings=vectors,
        encoder=init_from if init_from else instantiate(cfg.model),
        trainer=trainer,
        num_knowledge_layers=knowledge.num_knowledge_layers,
        entity_heads=knowledge.entity_heads,
        entity_size=knowledge.get("entity_size"),
        entity_bias_everywhere=knowledge.get("entity_bias_everywhere", False),
        tokenizer=data.get("tokenizer"),
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
        objectives={n: instantiate(node) for n, node in objective.objectives.items()},
        entity_objectives={
            n: instantiate(node) for n, node in objective.get("entity_objectives", {}).items()
        },
        weights=weights,
        entity_source=entity_source,
        known_entities=known_entities,
        num_workers=data.get("num_workers", 0),
        cache_dir=data.get("cache_dir"),
        kg=data.kg,  # recorded in final/knowledge_config.json for fine-tuning
    )
