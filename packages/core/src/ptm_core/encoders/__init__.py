"""Transformer encoders, their config, builders and presets."""

from ptm_core.encoders.builders import TransformerSize
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.decoder import DecoderCache, DecoderLayer, LayerCache, TransformerDecoder
from ptm_core.encoders.encoder_decoder import (
    EncoderDecoderModel,
    Seq2SeqOutput,
    build_encoder_decoder,
    seq2seq_encoder,
)
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.encoders.factory import encoder_class, encoder_from_config
from ptm_core.encoders.modernbert import (
    ModernBertConfig,
    ModernBertEncoder,
    modernbert_encoder,
    modernbert_tiny,
)
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
    xlnet_base,
    xlnet_encoder,
    xlnet_tiny,
)
from ptm_core.encoders.transformer import (
    EncoderOutput,
    TransformerEncoder,
    TransformerLayer,
    build_layers,
)
from ptm_core.encoders.xlnet import XLNetConfig, XLNetEncoder

__all__ = [
    "DecoderCache",
    "DecoderLayer",
    "EncoderConfig",
    "EncoderDecoderModel",
    "EncoderOutput",
    "LayerCache",
    "ModernBertConfig",
    "ModernBertEncoder",
    "Seq2SeqConfig",
    "Seq2SeqOutput",
    "TransformerDecoder",
    "TransformerEncoder",
    "TransformerLayer",
    "TransformerSize",
    "XLNetConfig",
    "XLNetEncoder",
    "albert_base",
    "albert_encoder",
    "albert_tiny",
    "bert_base",
    "bert_encoder",
    "bert_large",
    "bert_mini",
    "bert_tiny",
    "build_encoder_decoder",
    "build_layers",
    "electra_encoder",
    "electra_small",
    "electra_tiny",
    "encoder_class",
    "encoder_from_config",
    "modernbert_encoder",
    "modernbert_tiny",
    "seq2seq_encoder",
    "xlnet_base",
    "xlnet_encoder",
    "xlnet_tiny",
]
