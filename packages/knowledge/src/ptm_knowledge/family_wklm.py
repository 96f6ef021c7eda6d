"""The WKLM family: its typed settings and its :class:`~ptm_core.families.FamilySpec`.

Light on purpose (no torch): the ``ptm.families`` entry point imports this module to list
the families. WKLM saves a plain text encoder (kind ``encoder``, core's), so the spec has
no kinds, load or save of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptm_core.families.spec import FamilySpec
from ptm_knowledge.kg_corpus_settings import KGCorpusData


@dataclass
class WKLMOptions:
    """The ``wklm`` block: how linked mentions are replaced.

    Attributes:
        replace_prob: probability that an eligible mention (previous mention not
            replaced) is replaced (paper: 0.5).
        dynamic: new replacements every epoch (false: drawn once per row, static).
        aliases: replacement surface drawn among name and aliases (false: the name).
        untyped: mentions of entities without a KG type: ``keep`` (unreplaced) or
            ``error`` (naming ``entities.tsv:line``).
    """

    replace_prob: float = 0.5
    dynamic: bool = False
    aliases: bool = False
    untyped: str = "keep"


@dataclass
class WKLMSettings:
    """WKLM's config blocks: ``data`` (corpus, linked or not, + KG) and ``wklm``."""

    data: KGCorpusData = field(default_factory=KGCorpusData)
    wklm: WKLMOptions = field(default_factory=WKLMOptions)


WKLM = FamilySpec(
    name="wklm",
    description="WKLM: linked mentions replaced by same-type entities, replacement "
    "detection + 5% MLM",
    settings="ptm_knowledge.family_wklm:WKLMSettings",
    plan_pretraining="ptm_knowledge.wklm.pretraining:plan_wklm",
    recipes={"wklm": "pretrain"},
)
