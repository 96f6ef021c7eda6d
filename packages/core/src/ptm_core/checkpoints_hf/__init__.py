"""Name maps between ptm encoders/heads and Hugging Face ALBERT, ELECTRA and XLNet checkpoints.

The BERT map lives in :mod:`ptm_core.checkpoints`; these modules reuse it for the layers
(ELECTRA's layers are BERT's) and add what differs: factorised embeddings, ALBERT's one
shared layer group, and the pre-training heads (ALBERT MLM + SOP, ELECTRA discriminator).
Each family module exposes ``config_from_hf``, ``config_to_hf``, ``state_from_hf`` and
``state_to_hf`` with the same signatures, so :func:`ptm_core.checkpoints.load_encoder`
and ``save_encoder`` dispatch on ``model_type``.
"""

from ptm_core.checkpoints_hf import albert, electra, xlnet

# Hugging Face ``model_type`` -> family module.
FAMILIES = {"albert": albert, "electra": electra, "xlnet": xlnet}

__all__ = ["FAMILIES", "albert", "electra", "xlnet"]
