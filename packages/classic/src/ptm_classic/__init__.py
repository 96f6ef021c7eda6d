"""ptm-classic: the first two generations of pre-trained models, on the ptm-core runtime.

Subpackages: :mod:`ptm_classic.static` (word2vec through gensim, GloVe, Bengio's NNLM; the
vector table they all write), :mod:`ptm_classic.recurrent` (ELMo's biLM, ULMFiT's AWD-LSTM
and its classifier) and :mod:`ptm_classic.finetune` (TagLM: static vectors + char CNN + biLM
states under a BiLSTM-CRF). :mod:`ptm_classic.families` holds the elmo and awd_lstm
family specs (the ``ptm.families`` entry points; their evaluations, the held-out perplexity,
are in :mod:`ptm_classic.evaluation_kinds`). Import the subpackages;
this module stays light (no torch import here).
"""

__version__ = "0.1.0"
