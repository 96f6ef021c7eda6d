"""The KEPLER family: its typed settings and its :class:`~ptm_core.families.FamilySpec`.

Light on purpose (no torch): the ``ptm.families`` entry point imports this module to list
the families. KEPLER saves a plain text encoder (kind ``encoder``, core's), so the spec has
no kinds, load or save of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptm_core.families.spec import FamilySpec
from ptm_knowledge.kg_corpus_settings import KGCorpusData


@dataclass
class KeplerOptions:
    """The ``kepler`` block: the KE loss and the link-prediction evaluation.

    Attributes:
        ke_weight: weight of the KE loss in the mix (MLM's is ``objective.weights.mlm``).
        ke_batch_size: triples per step.
        num_negatives: corrupted triples per triple.
        margin: the KE margin ``gamma``.
        p_norm: the norm of the TransE distance.
        description_max_length: description tokens per entity with ``[CLS]``/``[SEP]``.
        allow_missing_descriptions: encode the name of entities without description
            (false: refuse them).
        test_fraction: held-out share of the triples (seeded split), unless
            ``train_triples``/``test_triples`` are given.
        train_triples: a ``triples.tsv`` (``head<TAB>relation<TAB>tail``, the KG's ids)
            to train the KE loss on, with
        test_triples: the held-out ``triples.tsv`` that link prediction ranks (a fixed
            split, e.g. PyKEEN's; give both or neither).
        eval_batch_size: descriptions per forward pass at evaluation.
    """

    ke_weight: float = 1.0
    ke_batch_size: int = 16
    num_negatives: int = 1
    margin: float = 4.0
    p_norm: float = 1.0
    description_max_length: int = 64
    allow_missing_descriptions: bool = True
    test_fraction: float = 0.1
    train_triples: str | None = None
    test_triples: str | None = None
    eval_batch_size: int = 256


@dataclass
class KeplerSettings:
    """KEPLER's config blocks: ``data`` (corpus + KG) and ``kepler``."""

    data: KGCorpusData = field(default_factory=KGCorpusData)
    kepler: KeplerOptions = field(default_factory=KeplerOptions)


KEPLER = FamilySpec(
    name="kepler",
    description="KEPLER: one encoder trained on MLM and a TransE-form KE loss over entity "
    "descriptions, then filtered link prediction",
    settings="ptm_knowledge.family_kepler:KeplerSettings",
    plan_pretraining="ptm_knowledge.kepler.pretraining:plan_kepler",
    recipes={"kepler": "pretrain"},
)
