"""SentiLARE (Ke et al., 2020, "SentiLARE: Sentiment-Aware Language Representation Learning
with Linguistic Knowledge"): POS and word-polarity embeddings added to the input, and a
label-aware masked LM (early fusion and late supervision) on a labelled sentiment corpus.
The ``sentilr`` family (:mod:`ptm_text.families`); see ``docs/guides/sentilr.md``."""

from ptm_text.sentilr.knowledge import (
    KnowledgeAnnotator,
    LexicalPosTagger,
    LexiconPolarity,
    SpacyPosTagger,
    WordKnowledge,
)
from ptm_text.sentilr.masking import LabelAwareMasking, label_aware_masking
from ptm_text.sentilr.model import SentiLRKnowledgeEmbeddings, SentiLRModel
from ptm_text.sentilr.objective import LabelAwareMLMObjective

__all__ = [
    "KnowledgeAnnotator",
    "LabelAwareMLMObjective",
    "LabelAwareMasking",
    "LexicalPosTagger",
    "LexiconPolarity",
    "SentiLRKnowledgeEmbeddings",
    "SentiLRModel",
    "SpacyPosTagger",
    "WordKnowledge",
    "label_aware_masking",
]
