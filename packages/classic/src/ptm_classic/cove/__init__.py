"""CoVe (McCann et al., 2017, "Learned in Translation: Contextualized Word Vectors").

An attentional translation model whose encoder, the MT-LSTM (a two-layer bidirectional
LSTM over frozen GloVe vectors), is kept after training: its outputs, concatenated with
GloVe as ``[GloVe(w); CoVe(w)]``, feed a downstream classifier or tagger with the MT-LSTM
frozen.

- :mod:`~ptm_classic.cove.mt_lstm`: the MT-LSTM and salesforce/cove's state-dict layout.
- :mod:`~ptm_classic.cove.decoder`: the attentional LSTM decoder.
- :mod:`~ptm_classic.cove.translation`: the translation model and its ``final/`` folder.
- :mod:`~ptm_classic.cove.pairs`: parallel pairs -> word ids -> batches.
- :mod:`~ptm_classic.cove.pretraining`: the cove family's pre-training plan.
- :mod:`~ptm_classic.cove.features` and :mod:`~ptm_classic.cove.finetune`: the downstream
  ``[GloVe; CoVe]`` features and the family's ``ptm finetune`` hook.
"""
