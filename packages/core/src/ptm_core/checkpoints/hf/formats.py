"""Which Hugging Face format fits an encoder (``save_encoder(format="hf")``, ``ptm export``)."""

from __future__ import annotations

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig


def default_hf_format(config: EncoderConfig) -> str:
    """``hf-<model_type>``: the model type an imported encoder came from (RoBERTa, XLM-R,
    DistilBERT), else the one its layout needs (XLNet, ALBERT, ELECTRA, BERT)."""
    model_type = getattr(config, "hf_model_type", None)
    if model_type is not None:
        return f"hf-{model_type}"
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
