"""InfoWord (Kong et al., 2020): masked LM plus an InfoNCE term between a sentence with an
n-gram masked and that n-gram, trained on the core BERT encoder (its ``final/`` is a core
encoder folder, so ``ptm finetune`` and every core tool read it)."""

from ptm_text.infoword.head import InfoWordScoreHead
from ptm_text.infoword.ngrams import NgramChoice, choose_ngrams, ngram_length_distribution
from ptm_text.infoword.objective import InfoWordObjective, info_nce, same_ngram

__all__ = [
    "InfoWordObjective",
    "InfoWordScoreHead",
    "NgramChoice",
    "choose_ngrams",
    "info_nce",
    "ngram_length_distribution",
    "same_ngram",
]
