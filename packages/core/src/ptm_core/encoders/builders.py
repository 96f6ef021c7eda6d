"""Component builders: one function per encoder family, numbers in, model out.

As torchtune's ``_component_builders``: a family builder takes the shared sizes (one
:class:`TransformerSize`) plus only the switches that make the family, and wires the
modules. Presets (:mod:`ptm_core.encoders.presets`) are sizes handed to these builders;
extension packages (XLM, VisualBERT, ViLBERT) call them for their text stack.

Every encoder is rebuilt from its ``config.json`` alone, so a builder's output is an
encoder class given its family's config (:class:`EncoderConfig`, the shape every family
shares, or a family's subclass such as :class:`~ptm_core.encoders.xlnet.XLNetConfig`);
what differs between families below the shape (the attention, feed-forward and norm
blocks) is passed into the shared layer stack
(:func:`~ptm_core.encoders.transformer.build_layers`'s ``attention=``, ``feed_forward=``,
``norm=``): by :class:`~ptm_core.encoders.XLNetEncoder`, by the encoder-decoder for T5
(:func:`~ptm_core.encoders.encoder_decoder.seq2seq_encoder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ptm_core.encoders.config import EncoderConfig, LayerSharing, NormPosition
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.encoders.xlnet import XLNetConfig, XLNetEncoder
from ptm_core.modules.execution import ExecutionSettings


@dataclass(frozen=True)
class TransformerSize:
    """The numbers every Transformer-encoder family shares (see :class:`EncoderConfig`).

    ``intermediate_size`` ``None`` means ``4 * hidden_size``. A builder function with these
    names among its keyword arguments passes them on with ``TransformerSize.pick(locals())``.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int | None = None
    max_positions: int = 512
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation: str = "gelu"
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    initializer_range: float = 0.02

    @classmethod
    def pick(cls, values: Mapping[str, Any], **overrides: Any) -> TransformerSize:
        """The size among ``values`` (a builder's ``locals()``: other names are ignored,
        missing ones keep their default), then ``overrides``."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in values.items() if k in names}, **overrides})

    def config(self, kind: type[EncoderConfig] = EncoderConfig, **switches: Any) -> EncoderConfig:
        """The config of these sizes with a family's ``switches``: an :class:`EncoderConfig`,
        or the family's subclass ``kind`` (:class:`~ptm_core.encoders.xlnet.XLNetConfig`)."""
        fields = dataclasses.asdict(self)
        fields["intermediate_size"] = self.intermediate_size or 4 * self.hidden_size
        return kind(**fields, **switches)


def bert(
    size: TransformerSize,
    *,
    type_vocab_size: int = 2,
    norm_position: NormPosition = "post",
    embedding_size: int | None = None,
    share_layers: LayerSharing = "none",
    settings: ExecutionSettings | None = None,
) -> TransformerEncoder:
    """BERT (Devlin et al., 2019): learned absolute positions and segments, post-LN layers.

    ``type_vocab_size=0`` drops the segment table (XLM); ``norm_position="pre"`` is the
    pre-LN variant; ``embedding_size`` / ``share_layers`` are the switches :func:`albert`
    and :func:`electra` set. ``settings``: the kernels it runs with (every builder takes
    them; see :class:`~ptm_core.modules.execution.ExecutionSettings`).
    """
    return TransformerEncoder(
        size.config(
            type_vocab_size=type_vocab_size,
            norm_position=norm_position,
            embedding_size=embedding_size,
            share_layers=share_layers,
        ),
        settings=settings,
    )


def albert(
    size: TransformerSize,
    *,
    embedding_size: int = 128,
    share_layers: LayerSharing = "all",
    settings: ExecutionSettings | None = None,
) -> TransformerEncoder:
    """ALBERT (Lan et al., 2020): BERT with a factorised ``V x E`` token table (projected
    ``E -> D``) and cross-layer parameter sharing (``"all"``, or ``"attention"`` /
    ``"ffn"`` as in the paper's ablations)."""
    return bert(size, embedding_size=embedding_size, share_layers=share_layers, settings=settings)


def electra(
    size: TransformerSize,
    *,
    embedding_size: int | None = 128,
    settings: ExecutionSettings | None = None,
) -> TransformerEncoder:
    """ELECTRA's discriminator (Clark et al., 2020): BERT whose embeddings may be narrower
    than the layers, so the narrower generator
    (:func:`ptm_core.objectives.electra_generator`) shares the very same tables."""
    return bert(size, embedding_size=embedding_size, settings=settings)


def xlnet(
    size: TransformerSize, *, memory_length: int = 0, settings: ExecutionSettings | None = None
) -> XLNetEncoder:
    """XLNet (Yang et al., 2019): Transformer-XL relative positions and segments, no
    embedding LayerNorm, post-LN layers; ``memory_length > 0`` turns on recurrence.
    ``size.max_positions`` is unused (no position table)."""
    config = size.config(
        XLNetConfig,
        type_vocab_size=2,
        norm_position="post",
        position_encoding="relative",
        segment_encoding="relative",
        memory_length=memory_length,
        embedding_layer_norm=False,
    )
    return XLNetEncoder(cast(XLNetConfig, config), settings=settings)
