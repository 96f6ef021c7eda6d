"""ModernBERT's encoder (Warner et al., 2024): rotary positions, GeGLU, bias-free pre-norm
layers, alternating local and global attention, unpadding.

It is the core stack (:class:`~ptm_core.encoders.TransformerEncoder`) with other blocks
passed in, not switches on :class:`~ptm_core.encoders.EncoderConfig`:

- attention: :class:`~ptm_core.modules.rotary_attention.RotarySelfAttention`, with a rotary
  base of ``global_rope_theta`` in the global layers (every ``global_attn_every_n_layers``-th,
  layer 0 first) and ``local_rope_theta`` in the local ones, whose window is
  ``local_attention // 2`` positions to each side; one fused ``Wqkv`` without biases;
- feed-forward: GeGLU, :class:`~ptm_core.modules.feed_forward.GatedFeedForward`
  (``Wo(act(W_gate x) * W_in x)``, Hugging Face's ``Wi`` is ``[W_gate; W_in]``);
- norms: LayerNorms without bias (``norm_bias``), pre-norm with a final norm; layer 0 reads
  the embedding norm's output directly (its attention norm is the identity);
- embeddings: the token table and a norm, no position or token-type table.

The local layers get their window as a ``sliding``
:class:`~ptm_core.modules.attention_structure.AttentionStructure`, built once per batch
from the padding mask (:meth:`ModernBertEncoder.start`), never a ``[B, L, L]`` tensor. The
stack unpads as every ptm encoder does (``ExecutionSettings.unpadding``); rotary positions
and windows then count the padded row's positions, so both paths agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.stack_state import LayerMasks, StackState
from ptm_core.encoders.transformer import TransformerEncoder, TransformerLayer
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.execution import ExecutionSettings
from ptm_core.modules.feed_forward import GatedFeedForward
from ptm_core.modules.rotary_attention import RotarySelfAttention

#: The ``"ptm_model"`` kind of a saved ModernBERT (its family: ``modernbert``).
MODERNBERT = "modernbert"


@dataclass
class ModernBertConfig(EncoderConfig):
    """An :class:`EncoderConfig` with ModernBERT's blocks (the defaults are ModernBERT-base's
    except the vocabulary, which comes from the tokenizer).

    The shared fields keep their meaning: ``dropout`` is the embedding and sub-layer output
    dropout (Hugging Face's ``embedding_dropout``), ``attention_dropout`` the dropout on
    the attention probabilities, ``layer_norm_eps`` Hugging Face's ``norm_eps``.

    Args:
        local_attention: the local layers' window in tokens (both sides together); a token
            sees ``local_attention // 2`` positions to each side.
        global_attn_every_n_layers: layers ``0, n, 2n, ...`` attend globally, the others
            locally.
        global_rope_theta: the rotary base of the global layers.
        local_rope_theta: the rotary base of the local layers.
        norm_bias: whether the LayerNorms have a bias.
        attention_bias: whether ``Wqkv`` and the attention's ``Wo`` have biases.
        mlp_bias: whether the GeGLU's linears have biases.
        initializer_cutoff_factor: the truncation of ModernBERT's normal initialisation, in
            standard deviations.
    """

    vocab_size: int = 50368
    intermediate_size: int = 1152
    num_layers: int = 22
    max_positions: int = 8192
    type_vocab_size: int = 0
    dropout: float = 0.0
    attention_dropout: float = 0.0
    layer_norm_eps: float = 1e-5
    norm_position: Literal["post", "pre"] = "pre"
    position_encoding: Literal["absolute", "relative", "bucketed", "rotary"] = "rotary"
    local_attention: int = 128
    global_attn_every_n_layers: int = 3
    global_rope_theta: float = 160_000.0
    local_rope_theta: float = 10_000.0
    norm_bias: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    initializer_cutoff_factor: float = 2.0

    ROTARY_FAMILY: ClassVar[bool] = True

    @classmethod
    def claims(cls, data: dict[str, Any]) -> bool:
        """A dict with ``position_encoding="rotary"`` is a ModernBERT encoder's."""
        return data.get("position_encoding") == "rotary"

    def __post_init__(self) -> None:
        super().__post_init__()
        fixed = {
            "norm_position": "pre",
            "type_vocab_size": 0,
            "share_layers": "none",
            "embedding_size": None,
            "embedding_layer_norm": True,
        }
        for name, value in fixed.items():
            if getattr(self, name) != value:
                raise ValueError(
                    f"ModernBertConfig.{name} must be {value!r} (ModernBERT's layout), got "
                    f"{getattr(self, name)!r}"
                )
        if self.local_attention < 2 or self.local_attention % 2:
            raise ValueError(
                f"ModernBertConfig.local_attention must be an even window of >= 2 tokens, got "
                f"{self.local_attention!r}"
            )
        if self.global_attn_every_n_layers < 1:
            raise ValueError(
                "ModernBertConfig.global_attn_every_n_layers must be >= 1, got "
                f"{self.global_attn_every_n_layers!r}"
            )
        if (self.hidden_size // self.num_heads) % 2:
            raise ValueError(
                f"ModernBertConfig: rotary positions need an even head width; hidden_size="
                f"{self.hidden_size} / num_heads={self.num_heads} is odd"
            )

    @property
    def hf_model_type(self) -> str:
        """The Hugging Face model type ``ptm export --format hf`` writes."""
        return "modernbert"

    @property
    def ptm_kind(self) -> str:
        """The ``"ptm_model"`` kind its folders carry."""
        return MODERNBERT

    @property
    def window(self) -> int:
        """How many positions a local layer's token sees to each side."""
        return self.local_attention // 2

    def is_global(self, index: int) -> bool:
        """Whether layer ``index`` attends globally."""
        return index % self.global_attn_every_n_layers == 0

    def build_encoder(self, settings: ExecutionSettings | None = None) -> ModernBertEncoder:
        """The encoder this config describes (randomly initialised)."""
        return ModernBertEncoder(self, settings=settings)


class ModernBertEncoder(TransformerEncoder):
    """ModernBERT's encoder on ptm's stack (see the module docstring).

    Takes what :class:`TransformerEncoder` takes, except ``position_ids`` (positions are
    rotary, ``0 .. L-1`` of each row) and masks other than ``[B, L]`` padding (the local
    layers build their window from it).

    Args:
        config: a :class:`ModernBertConfig`.
        insert: modules run between layers (see :class:`TransformerEncoder`).
        settings: the kernels (attention backend, unpadding, dropout kernel).
    """

    config: ModernBertConfig

    def __init__(
        self,
        config: ModernBertConfig,
        *,
        insert: dict[int, nn.Module] | None = None,
        settings: ExecutionSettings | None = None,
    ) -> None:
        if not isinstance(config, ModernBertConfig):
            raise TypeError(
                f"ModernBertEncoder needs a ModernBertConfig, got {type(config).__name__}"
            )
        run = settings or ExecutionSettings()

        def attention(index: int) -> nn.Module:
            is_global = config.is_global(index)
            return RotarySelfAttention(
                config.hidden_size,
                config.num_heads,
                theta=config.global_rope_theta if is_global else config.local_rope_theta,
                window=None if is_global else config.window,
                dropout=config.attention_dropout,
                bias=config.attention_bias,
                backend=run.attention_backend,
                dropout_kernel=run.dropout_kernel,
            )

        def feed_forward() -> nn.Module:
            return GatedFeedForward(
                config.hidden_size, config.intermediate_size, config.activation, config.mlp_bias
            )

        def norm() -> nn.LayerNorm:
            return nn.LayerNorm(
                config.hidden_size, eps=config.layer_norm_eps, bias=config.norm_bias
            )

        super().__init__(
            config,
            attention=attention,
            feed_forward=feed_forward,
            norm=norm,
            insert=insert,
            settings=run,
        )
        # ModernBERT's embedding norm is bias-free as its layers' are, and its first layer
        # reads that norm's output with no second norm in between.
        self.embeddings.norm = norm()
        first = self.layers[0]
        assert isinstance(first, TransformerLayer)
        first.attention_norm = nn.Identity()
        init_modernbert_weights(self, config)

    def start(
        self,
        input_ids: Tensor | None = None,
        attention_mask: LayerMasks = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        **options: Any,
    ) -> StackState:
        """:meth:`TransformerEncoder.start`, then the per-layer masks of the padded path:
        the padding mask for the global layers, one ``sliding`` structure for every local
        layer."""
        if position_ids is not None:
            raise ValueError(
                "ModernBERT's positions are rotary, 0 .. L-1 in every row; it takes no position_ids"
            )
        if attention_mask is not None and not (
            isinstance(attention_mask, Tensor) and attention_mask.dim() == 2
        ):
            raise ValueError(
                "ModernBertEncoder takes a [B, L] padding mask (its local layers build their "
                f"window from it); got {_describe(attention_mask)}"
            )
        state = super().start(input_ids, attention_mask, None, token_type_ids, **options)
        if state.layout is None:
            state.attention_mask = self.layer_masks(attention_mask, state.hidden)
        return state

    def build_task_head(
        self, kind: str, num_labels: int, dropout: float = 0.0, *, pool: str = "first"
    ) -> nn.Module:
        """ModernBERT's head for ``kind`` (``ModernBertFor...``'s prediction head, dropout
        and classifier; ``pool`` ``"first"`` or ``"mean"``): what ``build_task_model``
        puts on this encoder."""
        from ptm_core.heads.modernbert import ModernBertTaskHead

        return ModernBertTaskHead(
            self.config.hidden_size,
            kind,
            num_labels,
            dropout,
            pool=pool,
            activation=self.config.activation,
            layer_norm_eps=self.config.layer_norm_eps,
            initializer_range=self.config.initializer_range,
        )

    def layer_masks(self, padding: Tensor | None, hidden: Tensor) -> LayerMasks:
        """Layer ``i``'s mask as a function of ``i``: ``padding`` (global layers) or one
        ``sliding`` structure shared by every local layer."""
        batch, length = hidden.shape[:2]
        real = (
            torch.ones(batch, length, dtype=torch.bool, device=hidden.device)
            if padding is None
            else padding.bool()
        )
        local = AttentionStructure.sliding(real, self.config.window)
        config = self.config
        return lambda index: padding if config.is_global(index) else local


def _describe(mask: object) -> str:
    if isinstance(mask, AttentionStructure):
        return f"a {mask.kind} structure"
    if isinstance(mask, Tensor):
        return f"a mask of shape {tuple(mask.shape)}"
    return type(mask).__name__


def init_modernbert_weights(encoder: ModernBertEncoder, config: ModernBertConfig) -> None:
    """ModernBERT's initialisation: truncated normals (``initializer_cutoff_factor``
    standard deviations), ``initializer_range`` for the token table and the input
    projections, ``initializer_range / sqrt(2 * num_layers)`` for the projections that write
    into the residual stream (attention ``Wo``, GeGLU ``Wo``); biases 0, norms 1."""
    std = config.initializer_range
    out_std = std / math.sqrt(2.0 * config.num_layers)
    cutoff = config.initializer_cutoff_factor

    def normal(weight: Tensor, sigma: float) -> None:
        nn.init.trunc_normal_(weight, 0.0, sigma, -cutoff * sigma, cutoff * sigma)

    with torch.no_grad():
        normal(encoder.embeddings.word.weight, std)
        for layer in encoder.layers:
            assert isinstance(layer, TransformerLayer)
            attention, ffn = layer.attention, layer.feed_forward
            assert isinstance(attention, RotarySelfAttention)
            assert isinstance(ffn, GatedFeedForward)
            for linear, sigma in (
                (attention.qkv_proj, std),
                (attention.out_proj, out_std),
                (ffn.w_gate, std),
                (ffn.w_in, std),
                (ffn.w_out, out_std),
            ):
                normal(linear.weight, sigma)
                if linear.bias is not None:
                    linear.bias.zero_()


def modernbert_encoder(
    vocab_size: int = 50368,
    hidden_size: int = 768,
    num_layers: int = 22,
    num_heads: int = 12,
    intermediate_size: int = 1152,
    max_positions: int = 8192,
    local_attention: int = 128,
    global_attn_every_n_layers: int = 3,
    global_rope_theta: float = 160_000.0,
    local_rope_theta: float = 10_000.0,
    dropout: float = 0.0,
    attention_dropout: float = 0.0,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-5,
    pad_token_id: int = 0,
    initializer_range: float = 0.02,
    norm_bias: bool = False,
    attention_bias: bool = False,
    mlp_bias: bool = False,
    settings: ExecutionSettings | None = None,
) -> ModernBertEncoder:
    """Build a ModernBERT encoder (defaults: ModernBERT-base, 22 layers, 768 wide)."""
    config = ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        intermediate_size=intermediate_size,
        max_positions=max_positions,
        local_attention=local_attention,
        global_attn_every_n_layers=global_attn_every_n_layers,
        global_rope_theta=global_rope_theta,
        local_rope_theta=local_rope_theta,
        dropout=dropout,
        attention_dropout=attention_dropout,
        activation=activation,
        layer_norm_eps=layer_norm_eps,
        pad_token_id=pad_token_id,
        initializer_range=initializer_range,
        norm_bias=norm_bias,
        attention_bias=attention_bias,
        mlp_bias=mlp_bias,
    )
    return ModernBertEncoder(config, settings=settings)


def modernbert_tiny(vocab_size: int = 30522) -> ModernBertEncoder:
    """A test-size ModernBERT: 3 layers (global, local, local), 128 wide, 2 heads, a
    32-token local window."""
    return modernbert_encoder(
        vocab_size=vocab_size,
        hidden_size=128,
        num_layers=3,
        num_heads=2,
        intermediate_size=192,
        max_positions=512,
        local_attention=32,
    )
