"""KnowBERT's family spec and typed settings (torch-free; the hooks live in
:mod:`ptm_knowledge.knowbert.plans` and :mod:`ptm_knowledge.knowbert.family_hooks`).

KnowBERT (Peters et al., 2019) inserts a knowledge attention and recontextualisation
(KAR) per KG between two layers of a pre-trained encoder; ``knowbert.kgs`` names the KGs
(one: KnowBERT-Wiki or -WordNet; two: KnowBERT-W+W) and where each KAR sits. Training
follows the paper: ``knowbert.stage=linker`` trains the entity linkers alone with the
encoder frozen; ``knowbert.stage=full`` (``init_from`` = the linker stage's ``final/``)
trains everything with MLM + NSP + the linking loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptm_core.families.core_settings import FinetuneOptions
from ptm_core.families.spec import FamilySpec
from ptm_knowledge.family_ernie import KgEmbeddingOptions
from ptm_knowledge.kg_corpus_settings import KGCorpusData
from ptm_knowledge.kinds import KNOWBERT as KNOWBERT_KIND

#: The batch keys KnowBERT's network reads (the text encoder's plus the candidates).
KNOWBERT_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "token_type_ids",
    "candidate_spans",
    "candidate_entities",
    "candidate_priors",
)
STAGES = ("linker", "full")


@dataclass
class KarOptions:
    """``knowbert.kgs.<name>``: one KG and its KAR.

    Attributes:
        kg: the KG folder (``entities.tsv`` with aliases, ``triples.tsv``); ``None``:
            ``data.kg``. Candidates come from its alias table.
        layer: the KAR runs after text layer ``layer`` (0-based).
        embeddings_dir: entity embeddings made earlier (``ptm embed-kg``); ``None``:
            trained here as ``kg_embeddings`` says.
        kg_embeddings: the PyKEEN run (TransE by default).
        num_heads: span attention heads (must divide the embedding width).
        intermediate_size: span attention feed-forward width (``None``: 4 x width).
        scorer_hidden: the linker's MLP width (100 in the paper).
        threshold: the linker's weighting threshold (``None``: plain softmax weights; the
            margin loss's decode threshold in the released code).
        span_encoder_layers: BERT layers of self-attention among the pooled spans before
            scoring (the released final models use 1; 0: none).
        max_candidates: candidates per mention (highest prior first).
        max_spans: candidate mentions per row.
    """

    kg: str | None = None
    layer: int = 0
    embeddings_dir: str | None = None
    kg_embeddings: KgEmbeddingOptions = field(default_factory=KgEmbeddingOptions)
    num_heads: int = 4
    intermediate_size: int | None = None
    scorer_hidden: int = 100
    threshold: float | None = None
    span_encoder_layers: int = 0
    max_candidates: int = 8
    max_spans: int = 32


@dataclass
class KnowBertOptions:
    """The ``knowbert`` block (``configs/experiment/knowbert_tiny.yaml``).

    Attributes:
        stage: ``linker`` (stage 1: linkers only, encoder frozen, linking loss) or ``full``
            (stage 2: everything, MLM + NSP + linking).
        init_from: a KnowBERT ``final/`` (stage 1's) or a text encoder checkpoint (ptm or
            Hugging Face BERT, whose own tokenizer then prepares the corpus); ``None``:
            the ``model`` preset at random init.
        kgs: KG name -> :class:`KarOptions` (two for KnowBERT-W+W).
        linking_loss: ``softmax`` or ``margin``.
        linking_weight: the linking loss's weight in the objective mix.
        case: alias matching (``smart``, ``sensitive``, ``insensitive``).
    """

    stage: str = "full"
    init_from: str | None = None
    kgs: dict[str, KarOptions] = field(default_factory=lambda: {"kg": KarOptions()})
    linking_loss: str = "softmax"
    linking_weight: float = 1.0
    case: str = "smart"


@dataclass
class KnowBertFinetune:
    """The ``knowbert_finetune`` block (``configs/experiment/knowbert_finetune_tiny.yaml``).

    Attributes:
        task: a ``configs/task`` preset (GLUE-style classification, e.g. kg_entity_typing).
        use_kar: ``False``: the ablation, the same text encoder without its KARs.
        pool: ``mentions`` (mean of the states over the candidate mentions, [CLS] when
            none) or ``first`` ([CLS]).
        dropout: task-head dropout.
        num_workers: processes featurizing training batches.
    """

    task: Any = None
    use_kar: bool = True
    pool: str = "mentions"
    dropout: float = 0.1
    num_workers: int = 0


@dataclass
class KnowBertSettings:
    """KnowBERT's config blocks: pre-training (``data``, ``knowbert``) and fine-tuning
    (``knowbert_finetune``; or ``task`` + ``finetune`` under ``configs/finetune.yaml``)."""

    data: KGCorpusData = field(default_factory=KGCorpusData)
    knowbert: KnowBertOptions = field(default_factory=KnowBertOptions)
    knowbert_finetune: KnowBertFinetune = field(default_factory=KnowBertFinetune)
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)
    task: Any = None


KNOWBERT = FamilySpec(
    name="knowbert",
    description="KnowBERT: entity linkers and knowledge attention (KAR) between the layers "
    "of a pre-trained encoder; stage 1 linker, stage 2 MLM+NSP+linking; several KGs stack",
    kinds=(KNOWBERT_KIND,),
    input_keys=KNOWBERT_INPUTS,
    settings="ptm_knowledge.family_knowbert:KnowBertSettings",
    plan_pretraining="ptm_knowledge.knowbert.plans:plan_knowbert",
    finetune="ptm_knowledge.knowbert.family_hooks:finetune",
    load={KNOWBERT_KIND: "ptm_knowledge.knowbert.family_hooks:load"},
    save={KNOWBERT_KIND: "ptm_knowledge.knowbert.family_hooks:save"},
    evaluation="ptm_knowledge.evaluation_kinds:KNOWBERT",
    recognizes="ptm_knowledge.knowbert.family_hooks:recognizes",
    recipes={"knowbert": "pretrain", "knowbert_finetune": "finetune"},
)

__all__ = [
    "KNOWBERT",
    "KNOWBERT_INPUTS",
    "STAGES",
    "KarOptions",
    "KnowBertFinetune",
    "KnowBertOptions",
    "KnowBertSettings",
]
