"""The numbers that define a Transformer encoder, serialised as ``config.json``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ptm_core.modules.feed_forward import ACTIVATIONS

NormPosition = Literal["post", "pre"]
# What consecutive layers share (ALBERT, Lan et al., 2020): nothing (BERT), every
# parameter of a layer, only the attention block, or only the feed-forward block.
LayerSharing = Literal["none", "all", "attention", "ffn"]
LAYER_SHARING = ("none", "all", "attention", "ffn")
# Where positions enter: learned absolute embeddings added to the input (BERT),
# Transformer-XL / XLNet relative encodings inside every attention layer, or T5's bucketed
# relative bias (Raffel et al., 2020): no table, one learned scalar per head and distance
# bucket added to every layer's attention logits; or rotary positions (RoPE) inside every
# attention layer (ModernBERT, whose config class owns them: ptm_core.encoders.modernbert).
PositionEncoding = Literal["absolute", "relative", "bucketed", "rotary"]
POSITION_ENCODINGS = ("absolute", "relative", "bucketed", "rotary")

# Paper switches that earlier versions wrote into every encoder's config.json (27 keys),
# with the value every encoder but T5's / XLNet's had, and where each lives now. A saved
# config holding the default value loads as if the key were absent; any other value is
# refused by a config class that does not own the switch (see EncoderConfig.from_dict).
LEGACY_SWITCHES: dict[str, tuple[object, str]] = {
    "segment_encoding": ("absolute", "XLNetConfig (position_encoding='relative')"),
    "memory_length": (0, "XLNetConfig (position_encoding='relative')"),
    "relative_attention_num_buckets": (32, "the encoder-decoder's RelativeBuckets"),
    "relative_attention_max_distance": (128, "the encoder-decoder's RelativeBuckets"),
    "norm_type": ("layernorm", "the encoder-decoder's T5Blocks"),
    "bias": (True, "the encoder-decoder's T5Blocks"),
    "attention_scale": (True, "the encoder-decoder's T5Blocks"),
    "gated_feed_forward": (False, "the encoder-decoder's T5Blocks"),
    # Written as null by some callers; a pruned encoder's list makes it a
    # PrunedEncoderConfig (ptm_core.compress.pruned), which claims the dict first.
    "heads_per_layer": (None, "PrunedEncoderConfig (ptm_core.compress.pruned)"),
}


@dataclass
class EncoderConfig:
    """Hyper-parameters of :class:`~ptm_core.encoders.TransformerEncoder`.

    Field names are the builder's argument names and the keys of ``config.json``. This is
    the shape every family shares; a paper's switches are arguments of its builder and
    block factories (T5's norms, biases, scaling and gated MLP:
    :class:`~ptm_core.encoders.encoder_decoder_config.T5Blocks`), or fields of its own
    config subclass (XLNet's relative segments and memory:
    :class:`~ptm_core.encoders.xlnet.XLNetConfig`). :meth:`from_dict` reads the 27-key
    ``config.json`` earlier versions wrote (see :data:`LEGACY_SWITCHES`).

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
        embedding_layer_norm: LayerNorm on the embedding sum (BERT yes; XLNet and T5's
            encoder no). It stays here because two families set it and the encoder builds
            its embeddings itself (no block is passed in for them).
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
    embedding_layer_norm: bool = True

    # Whether this class describes Transformer-XL relative positions (XLNetConfig does).
    RELATIVE_FAMILY: ClassVar[bool] = False
    # Whether this class builds rotary attention layers (ModernBertConfig does).
    ROTARY_FAMILY: ClassVar[bool] = False

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
                f"(Transformer-XL), 'bucketed' (T5) or 'rotary' (ModernBERT), got {self.position_encoding!r}"
            )
        if self.relative and not self.RELATIVE_FAMILY:
            raise ValueError(
                "EncoderConfig.position_encoding='relative' is XLNet's encoder: build an "
                "XLNetConfig (ptm_core.encoders.xlnet), or use EncoderConfig.from_dict, "
                "which does so for such a config.json"
            )
        if (self.position_encoding == "rotary") != self.ROTARY_FAMILY:
            raise ValueError(
                "EncoderConfig.position_encoding='rotary' is ModernBERT's encoder: build a "
                "ModernBertConfig (ptm_core.encoders.modernbert), or use EncoderConfig.from_dict"
                if not self.ROTARY_FAMILY
                else f"{type(self).__name__}.position_encoding must be 'rotary', got "
                f"{self.position_encoding!r}"
            )
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"EncoderConfig.{name} must be in [0, 1), got {value!r}")

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
    def segment_table_size(self) -> int:
        """Rows of the token-type table: ``type_vocab_size`` (XLNet's relative segments: 0)."""
        return self.type_vocab_size

    @property
    def embedding_width(self) -> int:
        """``E``: the width of the embedding tables (``hidden_size`` unless factorised)."""
        return self.embedding_size if self.embedding_size is not None else self.hidden_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field (the keys of ``config.json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def claims(cls, data: dict[str, Any]) -> bool:
        """Whether a saved dict describes this class rather than its base (a family config
        subclass overrides this; :meth:`from_dict` asks every subclass)."""
        return False

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> EncoderConfig:
        """Build from a dict, rejecting unknown keys with a message naming them.

        ``position_encoding="relative"`` gives an :class:`~ptm_core.encoders.xlnet.XLNetConfig`.
        A key of :data:`LEGACY_SWITCHES` (written by earlier versions into every config) is
        dropped when it holds the value every other family had, and refused, naming where
        the switch lives now, otherwise.

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
        target = cls.family_of(data)
        names = {f.name for f in dataclasses.fields(target)}
        values: dict[str, Any] = {}
        unknown = []
        for key, value in data.items():
            if key in names:
                values[key] = value
            elif key in LEGACY_SWITCHES:
                default, owner = LEGACY_SWITCHES[key]
                if value != default:
                    raise ValueError(
                        f"{source}: {key}={value!r} is not a switch of {target.__name__} "
                        f"(position_encoding={data.get('position_encoding', 'absolute')!r}); "
                        f"it belongs to {owner}. Build that model instead, or set {key} to "
                        f"{default!r}"
                    )
            elif not key.startswith("ptm_"):
                unknown.append(key)
        if unknown:
            raise ValueError(
                f"{source}: unknown encoder config field(s) {sorted(unknown)}; valid fields: "
                f"{sorted(names)}"
            )
        return target(**values)

    @classmethod
    def family_of(cls, data: dict[str, Any]) -> type[EncoderConfig]:
        """The config class of a saved dict: the subclass of ``cls`` that
        :meth:`claims` it, else ``cls``.

        Family configs subclass this one where the family lives:
        :class:`~ptm_core.encoders.xlnet.XLNetConfig` (imported with
        :mod:`ptm_core.encoders`), :class:`~ptm_core.compress.pruned.PrunedEncoderConfig`
        (imported by the encoder checkpoint loader); the base class does not import them.
        """
        for subclass in cls.__subclasses__():
            if subclass.claims(data):
                return subclass.family_of(data)
        return cls


# Hugging Face model types whose encoder is BERT's shape under other names: the weights
# load into a TransformerEncoder, and only the export needs to know where they came from.
HF_LAYOUT_MODEL_TYPES = ("roberta", "xlm-roberta", "distilbert")


@dataclass
class HFEncoderConfig(EncoderConfig):
    """An :class:`EncoderConfig` whose weights came from a Hugging Face model type that is
    BERT's layer layout under other tensor names (RoBERTa, Liu et al., 2019; XLM-R, Conneau
    et al., 2020; DistilBERT, Sanh et al., 2019).

    The encoder it builds is a plain post-LN ``TransformerEncoder``: RoBERTa's position
    offset is taken out of the table on import (ptm's position ``i`` is RoBERTa's
    ``padding_idx + 1 + i``), DistilBERT is ``type_vocab_size=0``. The one extra field
    says which Hugging Face classes ``ptm export --format hf`` writes back.

    Args:
        hf_model_type: one of :data:`HF_LAYOUT_MODEL_TYPES`.
    """

    hf_model_type: str = "roberta"

    @property
    def pooler_activation(self) -> str:
        """The activation of the model type's sequence-classification pooler: DistilBERT's
        ``pre_classifier`` is followed by a ReLU, BERT's and RoBERTa's by tanh."""
        return "relu" if self.hf_model_type == "distilbert" else "tanh"

    @classmethod
    def claims(cls, data: dict[str, Any]) -> bool:
        """A dict with ``hf_model_type`` (and no pruned heads) is this config's."""
        return "hf_model_type" in data and "heads_per_layer" not in data

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hf_model_type not in HF_LAYOUT_MODEL_TYPES:
            raise ValueError(
                f"HFEncoderConfig.hf_model_type {self.hf_model_type!r} is unknown; valid: "
                f"{', '.join(HF_LAYOUT_MODEL_TYPES)}"
            )
