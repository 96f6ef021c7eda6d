"""The encoder layer and the builder of a stack of them, from an :class:`EncoderConfig`."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.execution import ExecutionConfigurable, ExecutionSettings
from ptm_core.modules.feed_forward import FeedForward, GatedFeedForward
from ptm_core.modules.norms import make_norm
from ptm_core.modules.unpadding import UnpadLayout


class TransformerLayer(nn.Module):
    """One encoder layer: self-attention and feed-forward, each with a residual.

    ``norm_position="post"`` is BERT's ``LN(x + Dropout(f(x)))``; ``"pre"`` is
    ``x + Dropout(f(LN(x)))`` (Xiong et al., 2020), which trains stably without warm-up.

    Args:
        attention: the self-attention module.
        feed_forward: the position-wise MLP.
        hidden_size: width ``D`` (for the LayerNorms).
        dropout: dropout on each sub-layer output.
        layer_norm_eps: LayerNorm epsilon.
        norm_position: ``"post"`` or ``"pre"``.
        norm: builds each of the two norms (T5 passes an RMSNorm); default a LayerNorm of
            ``hidden_size`` and ``layer_norm_eps``.
        dropout_kernel: the kernel of the sub-layer dropout (:mod:`ptm_core.modules.dropout`);
            ``None`` = the default.

    Shapes:
        ``(B, L, D) -> (B, L, D)``; mask as :func:`to_sdpa_mask` returns, or an additive
        float mask ``(B or 1, h, L, L)`` (T5's position bias, see
        :func:`~ptm_core.modules.positions.bias_mask`).
    """

    def __init__(
        self,
        attention: nn.Module,
        feed_forward: nn.Module,
        hidden_size: int,
        dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        norm_position: str = "post",
        *,
        norm: Callable[[], nn.Module] | None = None,
        dropout_kernel: str | None = None,
    ) -> None:
        super().__init__()
        make = norm or (lambda: make_norm("layernorm", hidden_size, layer_norm_eps))
        self.attention = attention
        self.attention_norm = make()
        self.feed_forward = feed_forward
        self.ffn_norm = make()
        self.dropout = Dropout(dropout, kernel=dropout_kernel)
        self.pre_norm = norm_position == "pre"

    def apply_execution_settings(self, settings: ExecutionSettings) -> None:
        """Pass ``settings`` to the attention block (when it takes them) and the dropout."""
        if isinstance(self.attention, ExecutionConfigurable):
            self.attention.apply_execution_settings(settings)
        if settings.dropout_kernel is not None:
            self.dropout.kernel = settings.dropout_kernel

    def forward(
        self,
        hidden_states: Tensor,
        mask: Tensor | AttentionStructure | None = None,
        return_scores: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Apply the layer; with ``return_scores`` also return the attention scores
        ``(B, h, L, L)`` (explicit attention path instead of SDPA)."""
        scores: Tensor | None = None
        attention_input = self.attention_input(hidden_states)
        if return_scores:
            attended, scores = self.attention(attention_input, mask, return_scores=True)
        else:
            attended = self.attention(attention_input, mask)
        x = self.after_attention(hidden_states, attended)
        return (x, scores) if scores is not None else x

    def forward_unpadded(self, hidden_states: Tensor, layout: UnpadLayout) -> Tensor:
        """Apply the layer to packed real tokens ``(T, D) -> (T, D)`` (see
        :mod:`ptm_core.encoders.unpadding`); the attention block needs
        ``forward_unpadded`` (:class:`MultiHeadSelfAttention` has it)."""
        attention = cast(MultiHeadSelfAttention, self.attention)
        attended = attention.forward_unpadded(self.attention_input(hidden_states), layout)
        return self.after_attention(hidden_states, attended)

    def forward_first(
        self, hidden_states: Tensor, mask: Tensor | None, layout: UnpadLayout | None
    ) -> Tensor:
        """The layer's output at each sequence's first position only: ``(B, 1, D)``.

        Args:
            hidden_states: ``(B, L, D)``, or packed real tokens ``(T, D)`` with ``layout``.
            mask: the padded ``[B, 1, 1, L]`` SDPA mask (also with ``layout``).
            layout: the unpadded batch's layout, or ``None``.
        """
        attention = cast(MultiHeadSelfAttention, self.attention)
        attended = attention.forward_first(self.attention_input(hidden_states), mask, layout)
        if layout is None:
            first = hidden_states[:, :1]
        else:  # each sequence's first packed token (an empty row reads a neighbour's)
            starts = layout.cu_seqlens[:-1].long().clamp(max=hidden_states.shape[0] - 1)
            first = hidden_states.index_select(0, starts).unsqueeze(1)
        return self.after_attention(first, attended)

    def attention_input(self, x: Tensor) -> Tensor:
        """What the attention block reads: ``LN(x)`` (pre-LN) or ``x`` (post-LN)."""
        return self.attention_norm(x) if self.pre_norm else x

    def after_attention(self, x: Tensor, attended: Tensor) -> Tensor:
        """The attention residual, then the feed-forward block with its residual.

        :class:`~ptm_core.encoders.XLNetEncoder` calls this once per stream: the content
        and query streams share every weight of the layer.
        """
        if self.pre_norm:
            x = x + self.dropout(attended)
            return x + self.dropout(self.feed_forward(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(attended))
        return self.ffn_norm(x + self.dropout(self.feed_forward(x)))


def standard_attention(
    config: EncoderConfig,
    index: int = 0,
    settings: ExecutionSettings | None = None,
    *,
    bias: bool = True,
    scale: bool = True,
    heads: int | None = None,
    head_dim: int | None = None,
) -> nn.Module:
    """Layer ``index``'s multi-head self-attention (BERT).

    ``bias=False`` drops the projection biases and ``scale=False`` the ``1/sqrt(d)`` of
    ``QK^T`` (T5, whose initialisation absorbs it; see
    :class:`~ptm_core.encoders.encoder_decoder_config.T5Blocks`). ``heads`` (default
    ``num_heads``) of width ``head_dim`` (default ``hidden_size / heads``): a pruned layer
    (:class:`~ptm_core.compress.pruned.PrunedEncoderConfig`) keeps fewer heads of the
    unpruned width.
    """
    settings = settings or ExecutionSettings()
    return MultiHeadSelfAttention(
        config.hidden_size,
        heads or config.num_heads,
        dropout=config.attention_dropout,
        bias=bias,
        scale=scale,
        head_dim=head_dim,
        backend=settings.attention_backend,
        dropout_kernel=settings.dropout_kernel,
    )


def standard_feed_forward(
    config: EncoderConfig, *, bias: bool = True, gated: bool = False
) -> nn.Module:
    """The position-wise MLP of a layer; ``gated`` is T5 v1.1's
    ``W_out(act(W_gate x) * W_in x)``, ``bias=False`` T5's bias-free linears."""
    if gated:
        return GatedFeedForward(
            config.hidden_size, config.intermediate_size, config.activation, bias
        )
    return FeedForward(config.hidden_size, config.intermediate_size, config.activation, bias)


def standard_norm(config: EncoderConfig, norm_type: str = "layernorm") -> nn.Module:
    """A norm of width ``hidden_size`` and epsilon ``layer_norm_eps``: LayerNorm (BERT) or
    ``norm_type="rmsnorm"`` (T5)."""
    return make_norm(norm_type, config.hidden_size, config.layer_norm_eps)


def build_layers(
    config: EncoderConfig,
    attention: Callable[[int], nn.Module] | None = None,
    *,
    feed_forward: Callable[[], nn.Module] | None = None,
    norm: Callable[[], nn.Module] | None = None,
    settings: ExecutionSettings | None = None,
) -> nn.ModuleList:
    """The ``num_layers`` layers of an encoder, sharing parameters as ``config.share_layers`` says.

    The blocks are passed in, as torchtune's builders pass ``attn=``/``mlp=``/``norm=``:
    ``attention(index)`` builds layer ``index``'s attention block (default
    :func:`standard_attention`; :class:`~ptm_core.encoders.XLNetEncoder` passes its
    relative-position attention, T5 an unscaled bias-free one), ``feed_forward()`` a
    feed-forward block (default :func:`standard_feed_forward`), ``norm()`` a norm (default
    :func:`standard_norm`, a LayerNorm). ``settings`` are the layers' kernels
    (:class:`ExecutionSettings`).

    ALBERT (Lan et al., 2020) shares parameters across layers: ``"all"`` puts the *same*
    layer module in every slot (one set of weights applied ``num_layers`` times);
    ``"attention"`` / ``"ffn"`` give every layer the same attention / feed-forward module and
    its own other block and LayerNorms. A shared tensor appears under every layer's name in
    ``state_dict()``; checkpoints store it once (see :mod:`ptm_core.checkpoints.io`).
    """

    if attention is None and config.relative:
        raise ValueError(
            "build_layers: a config with position_encoding='relative' needs its attention "
            "block passed in (XLNetEncoder passes relative_attention); use encoder_from_config"
        )
    settings = settings or ExecutionSettings()
    make_attention = attention or (lambda index: standard_attention(config, index, settings))
    make_ffn = feed_forward or (lambda: standard_feed_forward(config))
    make_layer_norm = norm or (lambda: standard_norm(config))

    def layer(attention_module: nn.Module, ffn_module: nn.Module) -> TransformerLayer:
        return TransformerLayer(
            attention=attention_module,
            feed_forward=ffn_module,
            hidden_size=config.hidden_size,
            dropout=config.dropout,
            layer_norm_eps=config.layer_norm_eps,
            norm_position=config.norm_position,
            norm=make_layer_norm,
            dropout_kernel=settings.dropout_kernel,
        )

    count = config.num_layers
    if config.share_layers == "all":
        shared = layer(make_attention(0), make_ffn())
        return nn.ModuleList([shared] * count)
    if config.share_layers == "attention":
        shared_attention = make_attention(0)
        return nn.ModuleList(layer(shared_attention, make_ffn()) for _ in range(count))
    if config.share_layers == "ffn":
        shared_ffn = make_ffn()
        return nn.ModuleList(layer(make_attention(0), shared_ffn) for _ in range(count))
    return nn.ModuleList(layer(make_attention(index), make_ffn()) for index in range(count))
