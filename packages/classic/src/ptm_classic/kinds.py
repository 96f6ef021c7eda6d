"""The ``"ptm_model"`` kinds ptm-classic's folders carry (no import beyond the standard
library: the family specs and ``read_model_kind`` read them before torch is loaded)."""

from __future__ import annotations

#: AWD-LSTM language model (ULMFiT's encoder).
AWD_LSTM = "awd_lstm"
#: ELMo's bidirectional LM.
ELMO = "elmo"
#: CoVe's translation model (its MT-LSTM gives the contextual vectors).
COVE = "cove"
