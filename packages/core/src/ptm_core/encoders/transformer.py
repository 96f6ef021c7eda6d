"""The Transformer encoder stack every ptm model stands on."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.unpadding import check_unpadding_mode, run_unpadded, unpad_layout
from ptm_core.model_kinds import ENCODER, XLNET
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import to_sdpa_mask
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import FeedForward, GatedFeedForward
from ptm_core.modules.initialization import init_bert_weights
from ptm_core.modules.norms import make_norm
from ptm_core.modules.positions import RelativePositionBias, bias_mask
from ptm_core.modules.unpadding import UnpadLayout

if TYPE_CHECKING:
    from ptm_core.tokenization import WordPieceTokenizer


@dataclass
class EncoderOutput:
    """What :class:`TransformerEncoder` returns.

    Attributes:
        last_hidden_state: ``(B, L, D)`` output of the last layer (after the final
            LayerNorm in the pre-LN variant).
        hidden_states: when requested, ``num_layers + 1`` tensors ``(B, L, D)``: the
            embedding output (after the ``E -> D`` projection when factorised), then every
            layer's output.
        attention_scores: when requested, ``num_layers`` tensors ``(B, h, L, L)``: each
            layer's pre-softmax attention scores (masked entries hold the most negative
            finite value), from the explicit attention path.
        query_hidden_state: :class:`~ptm_core.encoders.XLNetEncoder` given
            ``query_positions``: ``(B, P, D)`` output of XLNet's query stream at those
            positions.
        memory: :class:`~ptm_core.encoders.XLNetEncoder` with ``memory_length > 0``: ``num_layers`` detached
            tensors ``(B, M', D)``, each layer's input over the last ``M'`` positions
            (previous memory + this segment); pass them as ``memory=`` with the next
            segment.
    """

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...] | None = None
    attention_scores: tuple[Tensor, ...] | None = None
    query_hidden_state: Tensor | None = None
    memory: tuple[Tensor, ...] | None = None


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
        norm_type: ``"layernorm"`` or ``"rmsnorm"`` (T5).

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
        norm_type: str = "layernorm",
    ) -> None:
        super().__init__()
        self.attention = attention
        self.attention_norm = make_norm(norm_type, hidden_size, layer_norm_eps)
        self.feed_forward = feed_forward
        self.ffn_norm = make_norm(norm_type, hidden_size, layer_norm_eps)
        self.dropout = Dropout(dropout)
        self.pre_norm = norm_position == "pre"

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


def standard_attention(config: EncoderConfig, index: int = 0) -> nn.Module:
    """Layer ``index``'s multi-head self-attention (BERT; T5's switches; pruned heads)."""
    return MultiHeadSelfAttention(
        config.hidden_size,
        config.layer_heads(index),
        dropout=config.attention_dropout,
        bias=config.bias,
        scale=config.attention_scale,
        # Pruned heads (Michel et al., 2019) keep the unpruned width D / h.
        head_dim=None if config.heads_per_layer is None else config.hidden_size // config.num_heads,
    )


def standard_feed_forward(config: EncoderConfig) -> nn.Module:
    """The position-wise MLP of a layer (T5 v1.1's gated one when the config says so)."""
    if config.gated_feed_forward:
        return GatedFeedForward(
            config.hidden_size, config.intermediate_size, config.activation, config.bias
        )
    return FeedForward(config.hidden_size, config.intermediate_size, config.activation, config.bias)


def build_layers(
    config: EncoderConfig, attention: Callable[[int], nn.Module] | None = None
) -> nn.ModuleList:
    """The ``num_layers`` layers of an encoder, sharing parameters as ``config.share_layers`` says.

    ``attention(index)`` builds layer ``index``'s attention block (default
    :func:`standard_attention`; :class:`~ptm_core.encoders.XLNetEncoder` passes its
    relative-position attention), so every encoder class shares this one layer stack.

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
    make_attention = attention or (lambda index: standard_attention(config, index))

    def layer(attention_module: nn.Module, ffn_module: nn.Module) -> TransformerLayer:
        return TransformerLayer(
            attention=attention_module,
            feed_forward=ffn_module,
            hidden_size=config.hidden_size,
            dropout=config.dropout,
            layer_norm_eps=config.layer_norm_eps,
            norm_position=config.norm_position,
            norm_type=config.norm_type,
        )

    count = config.num_layers
    if config.share_layers == "all":
        shared = layer(make_attention(0), standard_feed_forward(config))
        return nn.ModuleList([shared] * count)
    if config.share_layers == "attention":
        shared_attention = make_attention(0)
        return nn.ModuleList(
            layer(shared_attention, standard_feed_forward(config)) for _ in range(count)
        )
    if config.share_layers == "ffn":
        shared_ffn = standard_feed_forward(config)
        return nn.ModuleList(layer(make_attention(0), shared_ffn) for _ in range(count))
    return nn.ModuleList(
        layer(make_attention(index), standard_feed_forward(config)) for index in range(count)
    )


class TransformerEncoder(nn.Module):
    """Bidirectional Transformer encoder (BERT, Devlin et al., 2019).

    Embeddings (token + position + segment) followed by ``num_layers`` Transformer layers.
    ALBERT (Lan et al., 2020) and ELECTRA (Clark et al., 2020) switches: factorised
    embeddings (``embedding_size`` ``E`` != ``D``: ``V x E`` tables and an ``E -> D``
    projection, ``embedding_projection``) and cross-layer sharing (``share_layers``).
    Every visibility pattern is a boolean ``attention_mask``: ``[B, L]`` key padding or
    ``[B, L, L]`` visibility (True = row may attend column). Extension packages compose
    this encoder (soft positions via ``position_ids``, language or visual embeddings via
    ``inputs_embeds``/``extra_embeds``) rather than subclassing it.

    This class is the absolute-position encoder (and T5's bucketed bias). Transformer-XL /
    XLNet relative positions and two-stream attention are
    :class:`~ptm_core.encoders.XLNetEncoder`, a subclass that reuses the embeddings and the
    layer stack; build from a config with :func:`~ptm_core.encoders.encoder_from_config`
    (``TransformerEncoder(config)`` with relative positions is refused, naming it).

    Args:
        config: the numbers that define the model (see :class:`EncoderConfig`).
        attention: builds layer ``index``'s attention block (see :func:`build_layers`);
            default :func:`standard_attention`. Subclasses pass their own.

    Unpadding: with a ``[B, L]`` padding mask the stack can run on the real tokens only
    and re-pad at the end (``unpadding_mode``, default ``"auto"``: when the batch has at
    least ``AUTO_MIN_PADDING`` = 30% padding; set it with
    :func:`~ptm_core.encoders.unpadding.set_unpadding`).
    Outputs at real positions are the same; at padding positions they are zeros on that
    path (and meaningless values on the padded one).

    Example:
        >>> from ptm_core.encoders import bert_tiny
        >>> encoder = bert_tiny()
        >>> out = encoder(torch.tensor([[2, 10, 11, 3]]))
        >>> out.last_hidden_state.shape
        torch.Size([1, 4, 128])
    """

    def __init__(
        self, config: EncoderConfig, *, attention: Callable[[int], nn.Module] | None = None
    ) -> None:
        super().__init__()
        self.config = config
        self.embeddings = TextEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.embedding_width,
            max_positions=config.max_positions,
            type_vocab_size=config.type_vocab_size if config.segment_encoding == "absolute" else 0,
            dropout=config.dropout,
            layer_norm_eps=config.layer_norm_eps,
            layer_norm=config.embedding_layer_norm,
            pad_token_id=config.pad_token_id,
            absolute_positions=config.position_encoding == "absolute",
        )
        self.embedding_projection = (
            nn.Linear(config.embedding_width, config.hidden_size) if config.factorised else None
        )
        self.layers = build_layers(config, attention)
        self.final_norm = (
            make_norm(config.norm_type, config.hidden_size, config.layer_norm_eps)
            if config.norm_position == "pre"
            else None
        )
        # T5: one bucketed position bias for the whole stack, added in every layer.
        self.relative_position_bias = (
            RelativePositionBias(
                config.num_heads,
                config.relative_attention_num_buckets,
                config.relative_attention_max_distance,
                bidirectional=True,
            )
            if config.bucketed
            else None
        )
        init_bert_weights(self, config.initializer_range)
        self._unpadding_mode = "auto"

    @property
    def unpadding_mode(self) -> str:
        """``"auto"``, ``"on"`` or ``"off"``: see :mod:`ptm_core.encoders.unpadding`."""
        return self._unpadding_mode

    @unpadding_mode.setter
    def unpadding_mode(self, mode: str) -> None:
        self._unpadding_mode = check_unpadding_mode(mode)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def text_config(self) -> EncoderConfig:
        """The architecture of the stack whose token states objectives read: this one."""
        return self.config

    @property
    def word_embeddings(self) -> nn.Embedding:
        """The token table; output heads tie their decoder weight to it."""
        return self.embeddings.word

    def embed(
        self,
        input_ids: Tensor | None,
        *,
        inputs_embeds: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        extra_embeds: Tensor | None = None,
    ) -> Tensor:
        """The layers' input ``(B, L, D)``: the embedding sum ``(B, L, E)``, projected
        ``E -> D`` when the embeddings are factorised."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        hidden = self.embeddings(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            extra_embeds=extra_embeds,
        )  # (B, L, E)
        if self.embedding_projection is not None:
            hidden = self.embedding_projection(hidden)  # (B, L, D)
        return hidden

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | AttentionStructure | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
        extra_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attention_scores: bool = False,
        memory: Sequence[Tensor] | None = None,
        memory_mask: Tensor | None = None,
        query_positions: Tensor | None = None,
        query_attention_mask: Tensor | None = None,
    ) -> EncoderOutput:
        """Encode a batch.

        Args:
            input_ids: ``(B, L)`` token ids (or give ``inputs_embeds``).
            attention_mask: ``(B, L)`` padding (1/True = real token) or ``(B, L, L)`` bool
                visibility; ``None`` = every token sees every token. Or an
                :class:`~ptm_core.modules.attention_structure.AttentionStructure` (the
                same masks as per-token ``[B, L]`` tensors), which the attention modules
                run through their ``attention_backend`` (see
                :func:`~ptm_core.modules.attention_backends.set_attention_backend`).
            position_ids: ``(B, L)`` or ``(1, L)``; default ``0..L-1`` (K-BERT passes soft
                positions here).
            token_type_ids: ``(B, L)`` segment ids; default all 0.
            inputs_embeds: ``(B, L, E)`` token vectors used instead of the token table
                (``E`` = ``D`` unless the embeddings are factorised).
            extra_embeds: ``(B, L, E)`` added to the embedding sum before the LayerNorm
                (XLM language embeddings, ...).
            output_hidden_states: also return the embedding output and every layer output.
            output_attention_scores: also return every layer's pre-softmax attention scores;
                this takes the explicit attention path instead of SDPA (slower, more memory).
            memory: :class:`~ptm_core.encoders.XLNetEncoder` only: the ``memory`` of the previous segment's
                output (``num_layers`` tensors ``(B, M, D)``); every token may attend it.
            memory_mask: ``(B, M)`` 1/True at the memory positions that hold real tokens
                (the previous segment's padding is hidden); default: all visible.
            query_positions: ``XLNetEncoder`` only: ``(B, P)`` positions at which to run
                XLNet's query stream (which knows a token's position, not its content);
                its output is ``query_hidden_state``.
            query_attention_mask: ``(B, P, L)`` bool, what each query-stream position
                may see of the segment's content (True = may attend); needed with
                ``query_positions``. Build it with
                :func:`~ptm_core.modules.attention_masks.permutation_masks`.

        Returns:
            :class:`EncoderOutput`.
        """
        if memory is not None or memory_mask is not None or query_positions is not None:
            raise ValueError(
                "memory and query_positions need an XLNetEncoder (position_encoding="
                "'relative', Transformer-XL / XLNet)"
            )
        hidden = self.embed(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            extra_embeds=extra_embeds,
        )  # (B, L, D)
        layout = unpad_layout(self, attention_mask, hidden.shape[1], output_attention_scores)
        if layout is not None:
            last, states = run_unpadded(self, hidden, layout, output_hidden_states)
            return EncoderOutput(last_hidden_state=last, hidden_states=states)
        mask = self.layer_mask(attention_mask, hidden)
        all_hidden: list[Tensor] | None = [hidden] if output_hidden_states else None
        all_scores: list[Tensor] | None = [] if output_attention_scores else None
        for layer in self.layers:
            if all_scores is not None:
                hidden, scores = layer(hidden, mask, return_scores=True)
                all_scores.append(scores)
            else:
                hidden = layer(hidden, mask)
            if all_hidden is not None:
                all_hidden.append(hidden)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        return EncoderOutput(
            last_hidden_state=hidden,
            hidden_states=tuple(all_hidden) if all_hidden is not None else None,
            attention_scores=tuple(all_scores) if all_scores is not None else None,
        )

    def layer_mask(
        self, attention_mask: Tensor | AttentionStructure | None, hidden: Tensor
    ) -> Tensor | AttentionStructure | None:
        """What every layer's attention receives for ``attention_mask``.

        Tensors become the SDPA mask (:func:`to_sdpa_mask`); a structure is passed on
        (moved to ``hidden``'s device) when every layer's attention is a
        :class:`MultiHeadSelfAttention`, and becomes its dense reference mask otherwise.
        T5's bucketed position bias is folded in as an additive mask (dense path).
        """
        length = hidden.shape[1]
        mask: Tensor | AttentionStructure | None
        if isinstance(attention_mask, AttentionStructure):
            attention_mask.check_length(length)
            mask = attention_mask.to(hidden.device)
            takes_structure = all(
                isinstance(layer.attention, MultiHeadSelfAttention) for layer in self.layers
            )
            if self.relative_position_bias is not None or not takes_structure:
                mask = mask.reference_mask()
        else:
            mask = to_sdpa_mask(attention_mask, length)
        if self.relative_position_bias is not None:
            assert not isinstance(mask, AttentionStructure)
            mask = bias_mask(self.relative_position_bias(length, length), mask)  # (B|1, h, L, L)
        return mask

    def save_pretrained(
        self,
        path: str | Path,
        *,
        format: str = "ptm",
        extra_writers: Sequence[Callable[[Path], object]] = (),
        tokenizer: WordPieceTokenizer | None = None,
        heads: torch.nn.Module | Mapping[str, Tensor] | None = None,
    ) -> Path:
        """Write ``config.json`` + ``model.safetensors`` atomically.

        Args:
            path: target directory (created; an existing one is replaced as a whole).
            format: ``"ptm"`` (our names), ``"hf"`` (a directory that
                ``transformers`` loads: ``BertModel``, or ``AlbertModel`` when layers are
                shared, ``ElectraModel`` when embeddings are factorised; post-LN only), or
                explicitly ``"hf-bert"`` / ``"hf-albert"`` / ``"hf-electra"`` /
                ``"hf-xlnet"`` (relative positions).
            extra_writers: callables given the directory being written, to add files in the
                same atomic step (``tokenizer.save``, a model card).
            tokenizer: written beside the weights; with ``format="hf"`` as the files
                ``AutoTokenizer`` reads (``tokenizer.json``, ``vocab.txt``,
                ``tokenizer_config.json``, ``special_tokens_map.json``).
            heads: pre-training heads (an objective mix or its state dict); with
                ``format="hf"`` under transformers' names (``cls.predictions.*``, ...), so
                ``AutoModelForMaskedLM`` loads the folder with its MLM head.

        Returns:
            The directory written.
        """
        from ptm_core.checkpoints import registry

        return cast(
            Path,
            registry.save(
                XLNET if self.config.relative else ENCODER,
                self,
                path,
                format=format,
                extra_writers=extra_writers,
                tokenizer=tokenizer,
                heads=heads,
            ),
        )

    @classmethod
    def from_pretrained(
        cls, path: str | Path, *, strict: bool = True, **overrides: Any
    ) -> TransformerEncoder:
        """Load a ptm directory or a Hugging Face BERT, ALBERT or ELECTRA directory.

        Hugging Face directories (``config.json`` with ``model_type`` ``"bert"``,
        ``"albert"`` or ``"electra"`` and
        ``model.safetensors`` or ``pytorch_model.bin``) are mapped name by name; pooler and
        pre-training head tensors are recognised and left to the heads. Unknown or missing
        tensors and shape mismatches raise :class:`~ptm_core.checkpoints.CheckpointError`
        listing them.

        Args:
            path: the checkpoint directory.
            strict: raise on missing/unknown tensors (shape mismatches always raise).
            **overrides: config fields to change, e.g. ``dropout=0.0``.
        """
        from ptm_core.checkpoints import registry

        return cast(TransformerEncoder, registry.load(ENCODER, path, strict=strict, **overrides))
