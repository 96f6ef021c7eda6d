"""ERNIE (Tsinghua) pre-training from a composed config: ``recipe: ernie_thu``.

Steps: link the corpus to the KG (unless ``data.linked_corpus`` is given), train KG
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
from ptm_knowledge.ernie import pretrain_ernie_thu
from ptm_knowledge.kg import load_entity_embeddings, load_knowledge_graph, train_kg_embeddings
from ptm_knowledge.linking import LinkedDocument, read_linked_corpus


def _linked_against(path: Path, entity_ids: Sequence[str], kg: str | Path) -> list[LinkedDocument]:
    """Read a given linked corpus; fail before embedding the KG if none of its mentions
    is an entity of ``kg`` (it was linked against another KG: TransE on a large KG takes
    an hour, and the run would then train dEA on nothing)."""
    documents = read_linked_corpus(path)
    known = set(entity_ids)
    mentions = sum(len(d.mentions) for d in documents)
    hits = sum(m.entity_id in known for d in documents for m in d.mentions)
    if mentions and not hits:
        raise ValueError(
            f"0 of {mentions:,} linked mentions of {path} are entities of data.kg={kg}: the "
            "linked corpus was linked against another KG; set data.kg to that KG, or link "
            f"the corpus again with ptm link --kg {kg}"
        )
    return documents


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
    if isinstance(trainer.adam_betas, list):
        trainer.adam_betas = tuple(trainer.adam_betas)
    output_dir = Path(trainer.output_dir)
    linked: Path | list[LinkedDocument] = linked_corpus_for(cfg, output_dir)
    precomputed = knowledge.get("embeddings_dir")
    if precomputed:  # e.g. from the embed_knowledge_graph flow
        entity_ids, vectors = load_entity_embeddings(precomputed)
        entity_source = str(precomputed)
    else:
        kg = load_knowledge_graph(data.kg)
        if data.get("linked_corpus"):
            linked = _linked_against(Path(data.linked_corpus), kg.entity_ids, data.kg)
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
    )
