"""Builders (numbers in, model out) and zero-argument presets for encoders."""

from __future__ import annotations

from ptm_core.encoders.config import EncoderConfig, NormPosition
from ptm_core.encoders.transformer import TransformerEncoder


def bert_encoder(
    vocab_size: int = 30522,
    hidden_size: int = 768,
    num_layers: int = 12,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    max_positions: int = 512,
    type_vocab_size: int = 2,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    norm_position: NormPosition = "post",
    pad_token_id: int = 0,
    initializer_range: float = 0.02,
) -> TransformerEncoder:
    """Build a BERT-style encoder from numbers (Hydra ``_target_`` for ``model/``).

    ``intermediate_size`` defaults to ``4 * hidden_size``. See :class:`EncoderConfig`
    for the meaning of every argument.
    """
    return TransformerEncoder(
        EncoderConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            num_layers=num_layers,
            num_heads=num_heads,
            intermediate_size=intermediate_size or 4 * hidden_size,
            max_positions=max_positions,
            type_vocab_size=type_vocab_size,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            norm_position=norm_position,
            pad_token_id=pad_token_id,
            initializer_range=initializer_range,
        )
    )


def bert_base() -> TransformerEncoder:
    """BERT-base: 12 layers, 768 wide, 12 heads, 3072 FFN, 30522 word pieces."""
    return bert_encoder()


def bert_large() -> TransformerEncoder:
    """BERT-large: 24 layers, 1024 wide, 16 heads, 4096 FFN."""
    return bert_encoder(hidden_size=1024, num_layers=24, num_heads=16)


def bert_mini() -> TransformerEncoder:
    """BERT-mini (Turc et al., 2019): 4 layers, 256 wide, 4 heads, 1024 FFN."""
    return bert_encoder(hidden_size=256, num_layers=4, num_heads=4)


def bert_tiny() -> TransformerEncoder:
    """A test-size encoder: 2 layers, 128 wide, 2 heads, 512 FFN, 30522 word pieces."""
    return bert_encoder(hidden_size=128, num_layers=2, num_heads=2, max_positions=128)
