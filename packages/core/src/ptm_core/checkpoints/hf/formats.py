"""Which Hugging Face format fits an encoder (``save_encoder(format="hf")``, ``ptm export``)."""

from __future__ import annotations

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig


def default_hf_format(config: EncoderConfig) -> str:
    if config.relative:
        return "hf-xlnet"
    if config.share_layers == "all":
        return "hf-albert"
    if config.share_layers != "none":
        raise CheckpointError(
            f"share_layers={config.share_layers!r} has no Hugging Face equivalent; save this "
            "encoder with format='ptm'"
        )
    return "hf-electra" if config.factorised else "hf-bert"
