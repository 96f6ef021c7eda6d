"""StructBERT (Wang et al., 2019): word- and sentence-structural objectives beside MLM.

Both are ptm objectives (a data side and a loss side) that combine with core's
:class:`~ptm_core.objectives.mlm.MaskedLMObjective` in an objective mix
(``configs/objective/structbert.yaml``); the model stays a core BERT encoder, so its
``final/`` fine-tunes, evaluates and exports as any BERT's.
"""

from ptm_text.structbert.sentence_structural import (
    CLASS_NAMES,
    SentenceStructuralObjective,
    iter_structural_pairs,
)
from ptm_text.structbert.word_structural import (
    WordStructuralObjective,
    eligible_positions,
    select_ngrams,
    shuffle_ngrams,
)

__all__ = [
    "CLASS_NAMES",
    "SentenceStructuralObjective",
    "WordStructuralObjective",
    "eligible_positions",
    "iter_structural_pairs",
    "select_ngrams",
    "shuffle_ngrams",
]
