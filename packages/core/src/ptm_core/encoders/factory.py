"""Build an encoder from its config: the one constructor the checkpoint loader calls."""

from __future__ import annotations

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import TransformerEncoder


def encoder_from_config(config: EncoderConfig) -> TransformerEncoder:
    """The encoder ``config`` describes, freshly initialised."""
    return TransformerEncoder(config)
