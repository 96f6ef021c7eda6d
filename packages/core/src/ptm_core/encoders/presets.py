"""Keyword-argument builders (Hydra ``_target_`` of ``configs/model/``) and zero-argument
presets: sizes handed to the family builders of :mod:`ptm_core.encoders.builders`."""

from __future__ import annotations

from ptm_core.encoders import builders
from ptm_core.encoders.builders import TransformerSize
from ptm_core.encoders.config import LayerSharing, NormPosition
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.encoders.xlnet import XLNetEncoder


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
    embedding_size: int | None = None,
    share_layers: LayerSharing = "none",
) -> TransformerEncoder:
    """Build a BERT-style encoder from numbers (Hydra ``_target_`` for ``model/``).

    ``intermediate_size`` defaults to ``4 * hidden_size``. See :class:`EncoderConfig`
    for the meaning of every argument; :func:`albert_encoder` and :func:`electra_encoder`
    are this builder with the ALBERT / ELECTRA switches set.
    """
    return builders.bert(
        TransformerSize.pick(locals()),
        type_vocab_size=type_vocab_size,
        norm_position=norm_position,
        embedding_size=embedding_size,
        share_layers=share_layers,
    )


def albert_encoder(
    vocab_size: int = 30000,
    embedding_size: int = 128,
    hidden_size: int = 768,
    num_layers: int = 12,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    max_positions: int = 512,
    share_layers: LayerSharing = "all",
    dropout: float = 0.0,
    attention_dropout: float = 0.0,
    activation: str = "gelu_new",
    layer_norm_eps: float = 1e-12,
    pad_token_id: int = 0,
    initializer_range: float = 0.02,
) -> TransformerEncoder:
    """ALBERT (Lan et al., 2020): a post-LN BERT encoder with two parameter reductions.

    1. Factorised embeddings: the ``V x E`` token table (``E = embedding_size`` << ``D``)
       is projected ``E -> D`` before the first layer, so the table costs ``V E + E D``
       instead of ``V D``.
    2. Cross-layer sharing: ``share_layers="all"`` applies one layer ``num_layers`` times
       (ALBERT's default); ``"attention"`` / ``"ffn"`` share only that block (the paper's
       ablations). The MLM head then decodes from ``E`` (``MaskedLMHead(embedding_size=E)``).

    ALBERT also drops dropout (0.0) and uses the tanh GELU (``gelu_new``), as released.
    """
    return builders.albert(
        TransformerSize.pick(locals()), embedding_size=embedding_size, share_layers=share_layers
    )


def electra_encoder(
    vocab_size: int = 30522,
    embedding_size: int | None = 128,
    hidden_size: int = 256,
    num_layers: int = 12,
    num_heads: int = 4,
    intermediate_size: int | None = None,
    max_positions: int = 512,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    pad_token_id: int = 0,
    initializer_range: float = 0.02,
) -> TransformerEncoder:
    """ELECTRA discriminator (Clark et al., 2020): a post-LN BERT encoder whose embeddings
    may be narrower than the layers (``embedding_size`` ``E``, projected ``E -> D``), so a
    narrower generator can share the very same embedding tables.

    Defaults are ELECTRA-small (``E=128``, ``D=256``, 12 layers, 4 heads). The generator is
    built from this encoder by :func:`ptm_core.objectives.electra_generator`.
    """
    return builders.electra(TransformerSize.pick(locals()), embedding_size=embedding_size)


def xlnet_encoder(
    vocab_size: int = 32000,
    hidden_size: int = 768,
    num_layers: int = 12,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    pad_token_id: int = 0,
    initializer_range: float = 0.02,
    memory_length: int = 0,
) -> XLNetEncoder:
    """Build an XLNet encoder (Yang et al., 2019): the core encoder with Transformer-XL
    relative positions and segments, no embedding LayerNorm, post-LN layers.

    ``memory_length`` > 0 turns on segment-level recurrence (the encoder then returns
    the memory to pass with the next segment). Pre-train it with
    :class:`~ptm_core.objectives.PermutationLMObjective`.
    """
    size = TransformerSize.pick(locals(), attention_dropout=dropout)
    return builders.xlnet(size, memory_length=memory_length)


def xlnet_base() -> XLNetEncoder:
    """XLNet-Base sizes: 12 layers, 768 wide, 12 heads, vocabulary 32000."""
    return xlnet_encoder()


def xlnet_tiny() -> XLNetEncoder:
    """A test-size XLNet: 2 layers, 128 wide, 2 heads."""
    return xlnet_encoder(vocab_size=30522, hidden_size=128, num_layers=2, num_heads=2)


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


def albert_base() -> TransformerEncoder:
    """ALBERT-base: E=128, 12 shared layers, 768 wide, 12 heads, 30000 pieces (12M params)."""
    return albert_encoder()


def albert_tiny() -> TransformerEncoder:
    """A test-size ALBERT: E=32, 4 shared layers, 128 wide, 2 heads."""
    return albert_encoder(
        embedding_size=32, hidden_size=128, num_layers=4, num_heads=2, max_positions=128
    )


def electra_small() -> TransformerEncoder:
    """ELECTRA-small discriminator: E=128, 12 layers, 256 wide, 4 heads, 1024 FFN."""
    return electra_encoder()


def electra_tiny() -> TransformerEncoder:
    """A test-size ELECTRA discriminator: E=64, 2 layers, 128 wide, 2 heads."""
    return electra_encoder(
        embedding_size=64, hidden_size=128, num_layers=2, num_heads=2, max_positions=128
    )
