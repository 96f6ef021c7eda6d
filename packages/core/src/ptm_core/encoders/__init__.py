"""Transformer encoders, their config, builders and presets."""

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.presets import bert_base, bert_encoder, bert_large, bert_mini, bert_tiny
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder, TransformerLayer

__all__ = [
    "EncoderConfig",
    "EncoderOutput",
    "TransformerEncoder",
    "TransformerLayer",
    "bert_base",
    "bert_encoder",
    "bert_large",
    "bert_mini",
    "bert_tiny",
]
