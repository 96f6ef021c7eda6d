"""The ERNIE families' specs and typed settings: ERNIE 1.0 (Baidu) and ERNIE (Tsinghua).

Registered by entry point (``ptm.families``); this module imports no torch: the hooks are
``"module:attribute"`` strings (:mod:`ptm_knowledge.ernie.plans` pre-trains,
:mod:`ptm_knowledge.ernie.family_hooks` fine-tunes, loads and saves). Each default of the
YAML blocks the families read (``knowledge``, ``ernie_finetune``, ``finetune``) is written
once, here; ``data`` (``configs/data/kg_sample.yaml``) is the KG-corpus block KEPLER and
WKLM read too (:class:`~ptm_knowledge.kg_corpus_settings.KGCorpusData`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptm_core.families.core_settings import FinetuneOptions
from ptm_core.families.spec import FamilySpec
from ptm_knowledge.kg_corpus_settings import KGCorpusData, LinkerSettings
from ptm_knowledge.kinds import ERNIE_THU as ERNIE_THU_KIND

#: The batch keys the knowledgeable encoder reads (the text encoder's plus ``entity_ids``).
ERNIE_THU_INPUTS = ("input_ids", "attention_mask", "position_ids", "token_type_ids", "entity_ids")


@dataclass
class KgEmbeddingOptions:
    """``knowledge.kg_embeddings``: the PyKEEN run that embeds the KG before pre-training
    (see :func:`~ptm_knowledge.kg.train_kg_embeddings`)."""

    model: str = "TransE"
    embedding_dim: int = 32
    num_epochs: int = 100
    batch_size: int = 64
    learning_rate: float = 0.01


@dataclass
class Knowledge:
    """The ``knowledge`` block of ERNIE-THU (``configs/experiment/ernie_thu_tiny.yaml``).

    Attributes:
        num_knowledge_layers: ``M``, the K-Encoder's layers (the text encoder's last ``M``).
        entity_heads: attention heads of the entity stream.
        entity_size: entity stream width (``None``: the KG embeddings').
        entity_bias_everywhere: the released code's entity bias on every token.
        init_from: a checkpoint (ptm or Hugging Face BERT) for the text layers; ``None``:
            the ``model`` preset at random init.
        embeddings_dir: entity embeddings made earlier (``ptm embed-kg``); ``None``: trained
            here as ``kg_embeddings`` says.
        kg_embeddings: the KG embedding run.
    """

    num_knowledge_layers: int = 1
    entity_heads: int = 1
    entity_size: int | None = None
    entity_bias_everywhere: bool = False
    init_from: str | None = None
    embeddings_dir: str | None = None
    kg_embeddings: KgEmbeddingOptions = field(default_factory=KgEmbeddingOptions)


@dataclass
class ErnieFinetune:
    """The ``ernie_finetune`` block (``configs/experiment/ernie_thu_finetune_tiny.yaml``).

    Attributes:
        task: a ``configs/task`` preset (its keys as :class:`~ptm_core.finetune.TaskSpec`).
        kg: the KG task text is linked against (``None``: the pre-training's).
        use_entities: ``False``: the kg-free ablation.
        pool: ``mentions`` (mean of the mention states) or ``first`` ([CLS]).
        dropout: task-head dropout.
        num_workers: processes featurizing training batches.
        cache_dir: where task-file links are cached.
        linker: how the task text is linked.
    """

    task: Any = None
    kg: str | None = None
    use_entities: bool = True
    pool: str = "mentions"
    dropout: float = 0.1
    num_workers: int = 0
    cache_dir: str | None = None
    linker: LinkerSettings = field(default_factory=LinkerSettings)


@dataclass
class ErnieBaiduSettings:
    """ERNIE-Baidu's config blocks besides trainer/objective/model/seed."""

    data: KGCorpusData = field(default_factory=KGCorpusData)


@dataclass
class ErnieThuSettings:
    """ERNIE-THU's config blocks: pre-training (``data``, ``knowledge``) and fine-tuning
    (``ernie_finetune``; or ``task`` + ``finetune`` under ``configs/finetune.yaml``)."""

    data: KGCorpusData = field(default_factory=KGCorpusData)
    knowledge: Knowledge = field(default_factory=Knowledge)
    ernie_finetune: ErnieFinetune = field(default_factory=ErnieFinetune)
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)
    task: Any = None


def recognizes(path: str | Path) -> bool:
    """An ERNIE-THU folder saved before ``config.json`` named its kind: the knowledge
    layers' ``knowledge_config.json`` sits beside the T-Encoder."""
    return (Path(path) / "knowledge_config.json").is_file()


ERNIE_BAIDU = FamilySpec(
    name="ernie_baidu",
    description="ERNIE 1.0 (Baidu): masked LM with staged knowledge masking (phrases, entities)",
    settings="ptm_knowledge.family_ernie:ErnieBaiduSettings",
    plan_pretraining="ptm_knowledge.ernie.plans:plan_ernie_baidu",
    recipes={"ernie_baidu": "pretrain"},
)

ERNIE_THU = FamilySpec(
    name="ernie_thu",
    description="ERNIE (Tsinghua): KG embeddings fused by a knowledgeable encoder, MLM+NSP+dEA",
    kinds=(ERNIE_THU_KIND,),
    input_keys=ERNIE_THU_INPUTS,
    settings="ptm_knowledge.family_ernie:ErnieThuSettings",
    plan_pretraining="ptm_knowledge.ernie.plans:plan_ernie_thu",
    finetune="ptm_knowledge.ernie.family_hooks:finetune",
    predictors={"ernie_thu_finetune": "ptm_knowledge.ernie.predict_rows:predict_ernie_rows"},
    load={ERNIE_THU_KIND: "ptm_knowledge.ernie.family_hooks:load"},
    save={ERNIE_THU_KIND: "ptm_knowledge.ernie.family_hooks:save"},
    # Refused with the flag to use, or (text_layers_only) the T-Encoder as a BertModel.
    export="ptm_core.checkpoints.hf.export:export_hf",
    evaluation=(
        "ptm_knowledge.evaluation_kinds:ERNIE_THU",
        "ptm_knowledge.evaluation_kinds:ERNIE_FINETUNED",
    ),
    recognizes="ptm_knowledge.family_ernie:recognizes",
    recipes={"ernie_thu": "pretrain", "ernie_thu_finetune": "finetune"},
)

__all__ = [
    "ERNIE_BAIDU",
    "ERNIE_THU",
    "ERNIE_THU_INPUTS",
    "ErnieBaiduSettings",
    "ErnieFinetune",
    "ErnieThuSettings",
    "FinetuneOptions",
    "KgEmbeddingOptions",
    "Knowledge",
    "recognizes",
]
