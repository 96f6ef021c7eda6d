"""Hyper-parameters of the encoder-decoder (:class:`Seq2SeqConfig`), serialised as ``config.json``.

Kept apart from the model (:mod:`ptm_core.encoders.encoder_decoder`) so checkpoint formats
and recipes can read and validate a config without building a network.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.decoder import DECODER_POSITIONS
from ptm_core.modules.feed_forward import ACTIVATIONS
from ptm_core.modules.norms import NORM_TYPES

INITIALIZATIONS = ("bert", "t5")


@dataclass(frozen=True)
class T5Blocks:
    """The switches of T5's layer blocks (Raffel et al., 2020), the same in the encoder and
    the decoder; the defaults are BERT's / BART's blocks.

    The core encoder does not carry them: the encoder-decoder passes blocks built with
    them into :class:`~ptm_core.encoders.TransformerEncoder` (``attention=``,
    ``feed_forward=``, ``norm=``; see :func:`~ptm_core.encoders.encoder_decoder.seq2seq_encoder`).

    Args:
        norm_type: ``"layernorm"`` or ``"rmsnorm"`` (T5: scale only, no mean, no bias).
        bias: biases on the attention and feed-forward linears (T5: no).
        attention_scale: divide ``QK^T`` by ``sqrt(d)`` (T5: no; its initialisation absorbs it).
        gated_feed_forward: ``W_out(act(W_gate x) * W_in x)`` (T5 v1.1 gated-GELU).
    """

    norm_type: str = "layernorm"
    bias: bool = True
    attention_scale: bool = True
    gated_feed_forward: bool = False


@dataclass(frozen=True)
class RelativeBuckets:
    """T5's bucketed relative position bias: a learned scalar per head and log-spaced
    distance bucket, added to every layer's attention logits.

    Args:
        num_buckets: distance buckets (T5: 32).
        max_distance: distance from which every key shares the last bucket (T5: 128).
    """

    num_buckets: int = 32
    max_distance: int = 128


@dataclass
class Seq2SeqConfig:
    """Hyper-parameters of :class:`EncoderDecoderModel`, serialised as ``config.json``.

    Args:
        vocab_size: token ids (shared by encoder and decoder).
        hidden_size: width ``D``.
        encoder_layers: encoder layers.
        decoder_layers: decoder layers.
        num_heads: attention heads (encoder and decoder).
        intermediate_size: feed-forward inner width.
        max_positions: longest encoder input and decoder input.
        position_offset: first learned position row used (BART: 2).
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation.
        layer_norm_eps: LayerNorm epsilon (BART: 1e-5).
        norm_position: ``"post"`` (BART) or ``"pre"``.
        pad_token_id: padding id.
        bos_token_id: begin-of-sequence id.
        eos_token_id: end id; generation stops there.
        decoder_start_token_id: first decoder input of generation.
        share_embeddings: one token table for encoder, decoder and LM head (BART).
        tie_lm_head: LM head weight = decoder token table.
        scale_embedding: multiply token vectors by ``sqrt(D)``.
        initializer_range: std of the normal initialisation.
        position_encoding: ``"learned"`` (absolute tables, BART) or ``"t5_buckets"`` (T5,
            Raffel et al., 2020: no tables; a learned scalar per head and log-spaced
            distance bucket, bidirectional in the encoder and causal in the decoder's
            self-attention, computed once per stack and added to every layer's logits).
        relative_attention_num_buckets: ``"t5_buckets"``: distance buckets (T5: 32).
        relative_attention_max_distance: ``"t5_buckets"``: distance that reaches the last
            bucket (T5: 128).
        norm_type: ``"layernorm"`` (BART) or ``"rmsnorm"`` (T5: scale only, eps 1e-6).
        bias: biases on the attention and feed-forward linears (T5: no).
        attention_scale: divide ``QK^T`` by ``sqrt(d)`` (T5: no; its initialisation absorbs it).
        gated_feed_forward: ``W_out(act(W_gate x) * W_in x)`` (T5 v1.1 gated-GELU).
        embedding_layer_norm: LayerNorm on the embeddings (BART yes, T5 no).
        scale_decoder_output: multiply the decoder output by ``D ** -0.5`` before the LM
            head (T5 v1.0 with its head tied to the token table).
        initialization: ``"bert"`` (every weight ``N(0, initializer_range)``) or ``"t5"``
            (:func:`~ptm_core.modules.initialization.init_t5_weights`: unit-variance token table,
            ``D^-1/2``-scaled projections, queries also ``d^-1/2``; what unscaled attention
            and a scaled tied head are designed for).

    T5 v1.0 is ``position_encoding="t5_buckets"``, ``norm_type="rmsnorm"``,
    ``layer_norm_eps=1e-6``, ``norm_position="pre"``, ``bias=False``,
    ``attention_scale=False``, ``activation="relu"``, ``embedding_layer_norm=False``,
    ``scale_decoder_output=True``, ``initialization="t5"``, ``position_offset=0`` and the
    pad id as decoder start
    (see ``configs/model/t5_tiny.yaml`` and :mod:`ptm_core.checkpoints.hf.t5`).
    """

    vocab_size: int = 50265
    hidden_size: int = 768
    encoder_layers: int = 6
    decoder_layers: int = 6
    num_heads: int = 12
    intermediate_size: int = 3072
    max_positions: int = 1024
    position_offset: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5
    norm_position: str = "post"
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    share_embeddings: bool = True
    tie_lm_head: bool = True
    scale_embedding: bool = False
    initializer_range: float = 0.02
    position_encoding: str = "learned"
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    norm_type: str = "layernorm"
    bias: bool = True
    attention_scale: bool = True
    gated_feed_forward: bool = False
    embedding_layer_norm: bool = True
    scale_decoder_output: bool = False
    initialization: str = "bert"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "encoder_layers", "decoder_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"Seq2SeqConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"Seq2SeqConfig.hidden_size={self.hidden_size} must be divisible by "
                f"num_heads={self.num_heads}"
            )
        if self.norm_position not in ("post", "pre"):
            raise ValueError(
                f"Seq2SeqConfig.norm_position must be 'post' or 'pre', got {self.norm_position!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"Seq2SeqConfig.activation {self.activation!r} is unknown; valid: "
                f"{', '.join(sorted(ACTIVATIONS))}"
            )
        if self.position_encoding not in DECODER_POSITIONS:
            raise ValueError(
                f"Seq2SeqConfig.position_encoding must be one of {', '.join(DECODER_POSITIONS)}, "
                f"got {self.position_encoding!r}"
            )
        if self.norm_type not in NORM_TYPES:
            raise ValueError(
                f"Seq2SeqConfig.norm_type must be one of {', '.join(NORM_TYPES)}, "
                f"got {self.norm_type!r}"
            )
        for name in ("relative_attention_num_buckets", "relative_attention_max_distance"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"Seq2SeqConfig.{name} must be an integer >= 2, got {value!r}")
        if self.initialization not in INITIALIZATIONS:
            raise ValueError(
                f"Seq2SeqConfig.initialization must be one of {', '.join(INITIALIZATIONS)}, "
                f"got {self.initialization!r}"
            )

    @property
    def bucketed(self) -> bool:
        """Whether positions are T5's bucketed relative bias (no position tables)."""
        return self.position_encoding == "t5_buckets"

    def blocks(self) -> T5Blocks:
        """The layer-block switches (T5's, or BART's defaults) of encoder and decoder."""
        return T5Blocks(
            norm_type=self.norm_type,
            bias=self.bias,
            attention_scale=self.attention_scale,
            gated_feed_forward=self.gated_feed_forward,
        )

    def buckets(self) -> RelativeBuckets:
        """The bucket numbers of ``position_encoding="t5_buckets"``."""
        return RelativeBuckets(
            self.relative_attention_num_buckets, self.relative_attention_max_distance
        )

    def encoder_config(self) -> EncoderConfig:
        """The core encoder's shape (no segment embeddings; the offset position table or
        T5's bucketed bias). Its blocks are :meth:`blocks`, passed in by the model."""
        return EncoderConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.encoder_layers,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            max_positions=self.max_positions + self.position_offset,
            type_vocab_size=0,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            layer_norm_eps=self.layer_norm_eps,
            norm_position=self.norm_position,  # type: ignore[arg-type]
            pad_token_id=self.pad_token_id,
            initializer_range=self.initializer_range,
            position_encoding="bucketed" if self.bucketed else "absolute",
            embedding_layer_norm=self.embedding_layer_norm,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> Seq2SeqConfig:
        """Build from a dict; unknown keys (other than ``ptm_*``) raise naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in names and not k.startswith("ptm_"))
        if unknown:
            raise ValueError(
                f"{source}: unknown seq2seq config field(s) {unknown}; valid: {sorted(names)}"
            )
        return cls(**{k: v for k, v in data.items() if k in names})
