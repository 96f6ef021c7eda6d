"""TagLM (Peters et al., 2017): word-level taggers and classifiers over static vectors,
a character CNN and frozen biLM states.

Import from the modules (:mod:`ptm_classic.finetune.word_features`,
:mod:`ptm_classic.finetune.taglm`,
:mod:`ptm_classic.finetune.word_classifier`, :mod:`ptm_classic.finetune.taglm_io`).
"""
