"""Transformer encoders, their config, builders and presets."""

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.presets import (
    albert_base,
    albert_encoder,
    albert_tiny,
    bert_base,
    bert_encoder,
    bert_large,
    bert_mini,
    bert_tiny,
    electra_encoder,
    electra_small,
    electra_tiny,
)
from ptm_core.encoders.transformer import (
    EncoderOutput,
    TransformerEncoder,
    TransformerLayer,
    build_layers,
)

__all__ = [
    "EncoderConfig",
    "EncoderOutput",
    "TransformerEncoder",
    "TransformerLayer",
    "albert_base",
    "albert_encoder",
    "albert_tiny",
    "bert_base",
    "bert_encoder",
    "bert_large",
    "bert_mini",
    "bert_tiny",
    "build_layers",
    "electra_encoder",
    "electra_small",
    "electra_tiny",
]
