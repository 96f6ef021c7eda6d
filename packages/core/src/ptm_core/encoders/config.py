"""The numbers that define a Transformer encoder, serialised as ``config.json``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from ptm_core.modules.feed_forward import ACTIVATIONS
from ptm_core.modules.norms import NORM_TYPES

NormPosition = Literal["post", "pre"]
# What consecutive layers share (ALBERT, Lan et al., 2020): nothing (BERT), every
# parameter of a layer, only the attention block, or only the feed-forward block.
LayerSharing = Literal["none", "all", "attention", "ffn"]
LAYER_SHARING = ("none", "all", "attention", "ffn")
# Where positions (and segments) enter: learned absolute embeddings added to the input
# (BERT), or Transformer-XL / XLNet relative encodings inside every attention layer.
Encoding = Literal["absolute", "relative"]
ENCODINGS = ("absolute", "relative")
# Positions also have T5's bucketed relative bias (Raffel et al., 2020): no table, one
# learned scalar per head and distance bucket added to every layer's attention logits.
PositionEncoding = Literal["absolute", "relative", "bucketed"]
POSITION_ENCODINGS = ("absolute", "relative", "bucketed")
NormType = Literal["layernorm", "rmsnorm"]


@dataclass
class EncoderConfig:
    """Hyper-parameters of :class:`~ptm_core.encoders.TransformerEncoder`.

    Field names are the builder's argument names and the keys of ``config.json``.

    Args:
        vocab_size: number of token ids.
        hidden_size: model width ``D``.
        num_layers: number of Transformer layers.
        num_heads: attention heads per layer.
        intermediate_size: feed-forward inner width.
        max_positions: learned absolute positions.
        type_vocab_size: segment ids (0 = no segment embeddings).
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation name.
        layer_norm_eps: LayerNorm epsilon.
        norm_position: ``"post"`` (BERT: ``LN(x + f(x))``) or ``"pre"``
            (``x + f(LN(x))`` with a final LayerNorm).
        pad_token_id: padding id of the token table.
        initializer_range: standard deviation of the normal weight initialisation.
        embedding_size: width ``E`` of the embedding tables when it differs from ``D``
            (factorised embeddings, ALBERT/ELECTRA: ``V x E`` table, then an ``E -> D``
            projection); ``None`` = ``D``, no projection (BERT).
        share_layers: cross-layer parameter sharing (ALBERT): ``"none"`` (BERT),
            ``"all"`` (one layer applied ``num_layers`` times), ``"attention"`` or ``"ffn"``
            (only that block is shared, each layer keeps its own other block and norms).
        position_encoding: ``"absolute"`` (a learned table of ``max_positions`` added to
            the input, BERT) or ``"relative"`` (Transformer-XL, Dai et al., 2019: no
            position table; every attention layer scores content, sinusoidal relative
            distance and, with biases ``u``/``v``, both; XLNet's encoder). A relative
            encoder has no length limit; ``max_positions`` is then unused. ``"bucketed"``
            (T5, Raffel et al., 2020): no position table; a learned scalar per head and
            log-spaced distance bucket (bidirectional) is computed once per forward pass
            and added to the attention logits of every layer.
        segment_encoding: ``"absolute"`` (token-type table, BERT) or ``"relative"``
            (XLNet: attention scores whether query and key are in the same segment; no
            token-type table). ``"relative"`` needs ``position_encoding="relative"``.
        memory_length: Transformer-XL segment-level recurrence: how many hidden states
            of earlier segments each layer keeps as memory (``0`` = no recurrence). The
            encoder returns the new memory; it is detached (no gradient flows into it).
            Needs ``position_encoding="relative"``.
        embedding_layer_norm: LayerNorm on the embedding sum (BERT yes, XLNet no).
        relative_attention_num_buckets: ``"bucketed"`` positions: distance buckets (T5: 32).
        relative_attention_max_distance: ``"bucketed"`` positions: distance from which all
            keys share the last bucket (T5: 128).
        norm_type: ``"layernorm"`` (BERT) or ``"rmsnorm"`` (T5: scale only, no mean, no
            bias) for the layer norms and the final norm.
        bias: biases on the attention and feed-forward linears (T5: no).
        attention_scale: divide ``QK^T`` by ``sqrt(d)`` (T5: no, its initialisation
            absorbs the factor).
        gated_feed_forward: ``W_out(act(W_gate x) * W_in x)`` instead of the two-layer MLP
            (T5 v1.1 gated-GELU).
        heads_per_layer: after attention-head pruning (Michel et al., 2019), the number of
            heads each layer kept (``num_layers`` integers, each ``1..num_heads``); every
            head keeps the width ``hidden_size / num_heads``. ``None`` = ``num_heads`` in
            every layer (an unpruned encoder). Absolute positions without layer sharing
            only (written by :mod:`ptm_core.compress.prune`).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_positions: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation: str = "gelu"
    layer_norm_eps: float = 1e-12
    norm_position: NormPosition = "post"
    pad_token_id: int = 0
    initializer_range: float = 0.02
    embedding_size: int | None = None
    share_layers: LayerSharing = "none"
    position_encoding: PositionEncoding = "absolute"
    segment_encoding: Encoding = "absolute"
    memory_length: int = 0
    embedding_layer_norm: bool = True
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    norm_type: NormType = "layernorm"
    bias: bool = True
    attention_scale: bool = True
    gated_feed_forward: bool = False
    heads_per_layer: list[int] | None = None

    def __post_init__(self) -> None:
        positive = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
        for name in (*positive, "max_positions"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"EncoderConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"EncoderConfig.hidden_size={self.hidden_size} must be divisible by "
                f"num_heads={self.num_heads}"
            )
        if self.norm_position not in ("post", "pre"):
            raise ValueError(
                f"EncoderConfig.norm_position must be 'post' or 'pre', got {self.norm_position!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"EncoderConfig.activation {self.activation!r} is unknown; valid: "
                f"{', '.join(sorted(ACTIVATIONS))}"
            )
        if self.embedding_size is not None and (
            not isinstance(self.embedding_size, int) or self.embedding_size <= 0
        ):
            raise ValueError(
                "EncoderConfig.embedding_size must be a positive integer or None (= hidden_size), "
                f"got {self.embedding_size!r}"
            )
        if self.share_layers not in LAYER_SHARING:
            raise ValueError(
                f"EncoderConfig.share_layers must be one of {', '.join(LAYER_SHARING)}, "
                f"got {self.share_layers!r}"
            )
        if self.position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                "EncoderConfig.position_encoding must be 'absolute' or 'relative' "
                f"(Transformer-XL), or 'bucketed' (T5), got {self.position_encoding!r}"
            )
        if self.segment_encoding not in ENCODINGS:
            raise ValueError(
                "EncoderConfig.segment_encoding must be 'absolute' or 'relative', "
                f"got {self.segment_encoding!r}"
            )
        if self.norm_type not in NORM_TYPES:
            raise ValueError(
                f"EncoderConfig.norm_type must be one of {', '.join(NORM_TYPES)}, "
                f"got {self.norm_type!r}"
            )
        for name in ("relative_attention_num_buckets", "relative_attention_max_distance"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"EncoderConfig.{name} must be an integer >= 2, got {value!r}")
        if self.relative and (
            self.norm_type != "layernorm"
            or not self.bias
            or not self.attention_scale
            or self.gated_feed_forward
        ):
            raise ValueError(
                "EncoderConfig.norm_type, bias, attention_scale and gated_feed_forward are "
                "switches of the standard attention layers; position_encoding='relative' "
                "(Transformer-XL) keeps their defaults"
            )
        if not isinstance(self.memory_length, int) or self.memory_length < 0:
            raise ValueError(
                f"EncoderConfig.memory_length must be an integer >= 0, got {self.memory_length!r}"
            )
        if not self.relative and (self.segment_encoding == "relative" or self.memory_length):
            raise ValueError(
                "EncoderConfig.segment_encoding='relative' and memory_length > 0 need "
                "position_encoding='relative' (Transformer-XL attention); set "
                "position_encoding='relative' or turn them off"
            )
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"EncoderConfig.{name} must be in [0, 1), got {value!r}")
        if self.heads_per_layer is not None:
            self._check_heads_per_layer()

    def _check_heads_per_layer(self) -> None:
        heads = self.heads_per_layer
        if (
            not isinstance(heads, list | tuple)
            or len(heads) != self.num_layers
            or not all(isinstance(h, int) and 1 <= h <= self.num_heads for h in heads)
        ):
            raise ValueError(
                f"EncoderConfig.heads_per_layer must be a list of num_layers={self.num_layers} "
                f"integers in 1..num_heads={self.num_heads}, got {heads!r}; use null for an "
                "unpruned encoder"
            )
        if self.position_encoding != "absolute" or self.share_layers != "none":
            raise ValueError(
                "EncoderConfig.heads_per_layer (pruned heads) needs position_encoding="
                f"'absolute' and share_layers='none', got {self.position_encoding!r} and "
                f"{self.share_layers!r}; set heads_per_layer to null"
            )
        self.heads_per_layer = list(heads)

    def layer_heads(self, index: int) -> int:
        """Heads of layer ``index``: ``heads_per_layer[index]``, else ``num_heads``."""
        return self.num_heads if self.heads_per_layer is None else self.heads_per_layer[index]

    @property
    def factorised(self) -> bool:
        """Whether the embeddings are narrower/wider than the layers (an ``E -> D`` projection)."""
        return self.embedding_size is not None and self.embedding_size != self.hidden_size

    @property
    def relative(self) -> bool:
        """Whether attention uses Transformer-XL relative positions (XLNet) instead of a table."""
        return self.position_encoding == "relative"

    @property
    def bucketed(self) -> bool:
        """Whether attention adds T5's bucketed relative position bias (no position table)."""
        return self.position_encoding == "bucketed"

    @property
    def embedding_width(self) -> int:
        """``E``: the width of the embedding tables (``hidden_size`` unless factorised)."""
        return self.embedding_size if self.embedding_size is not None else self.hidden_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field (``heads_per_layer`` only when heads were pruned, so
        an unpruned encoder's ``config.json`` is what earlier ptm versions wrote and read)."""
        data = dataclasses.asdict(self)
        if data["heads_per_layer"] is None:
            del data["heads_per_layer"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> EncoderConfig:
        """Build from a dict, rejecting unknown keys with a message naming them.

        Args:
            data: the fields; extra bookkeeping keys starting with ``ptm_`` are ignored.
            source: where the dict came from, for error messages.
        """
        if "ptm_quantization" in data:
            raise ValueError(
                f"{source}: holds a quantised model ({data['ptm_quantization']}, written by "
                "`ptm compress`), which a float encoder cannot load; load it with "
                "ptm_core.compress.load_compressed"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in names and not k.startswith("ptm_"))
        if unknown:
            raise ValueError(
                f"{source}: unknown encoder config field(s) {unknown}; valid fields: "
                f"{sorted(names)}"
            )
        return cls(**{k: v for k, v in data.items() if k in names})
