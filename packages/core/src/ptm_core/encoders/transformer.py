"""The Transformer encoder stack every ptm model stands on."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import memory_visibility, to_sdpa_mask
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import FeedForward, GatedFeedForward
from ptm_core.modules.initialization import init_bert_weights
from ptm_core.modules.norms import make_norm
from ptm_core.modules.positions import RelativePositionBias, bias_mask
from ptm_core.modules.relative_attention import (
    RelativeMultiHeadAttention,
    sinusoid_relative_positions,
)

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
        query_hidden_state: relative encoders given ``query_positions``: ``(B, P, D)``
            output of XLNet's query stream at those positions.
        memory: relative encoders with ``memory_length > 0``: ``num_layers`` detached
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
        self.dropout = nn.Dropout(dropout)
        self.pre_norm = norm_position == "pre"

    def forward(
        self, hidden_states: Tensor, mask: Tensor | None = None, return_scores: bool = False
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

    def attention_input(self, x: Tensor) -> Tensor:
        """What the attention block reads: ``LN(x)`` (pre-LN) or ``x`` (post-LN)."""
        return self.attention_norm(x) if self.pre_norm else x

    def after_attention(self, x: Tensor, attended: Tensor) -> Tensor:
        """The attention residual, then the feed-forward block with its residual.

        The relative-position path (XLNet) calls this once per stream: the content and
        query streams share every weight of the layer.
        """
        if self.pre_norm:
            x = x + self.dropout(attended)
            return x + self.dropout(self.feed_forward(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(attended))
        return self.ffn_norm(x + self.dropout(self.feed_forward(x)))


def build_layers(config: EncoderConfig) -> nn.ModuleList:
    """The ``num_layers`` layers of an encoder, sharing parameters as ``config.share_layers`` says.

    ALBERT (Lan et al., 2020) shares parameters across layers: ``"all"`` puts the *same*
    layer module in every slot (one set of weights applied ``num_layers`` times);
    ``"attention"`` / ``"ffn"`` give every layer the same attention / feed-forward module and
    its own other block and LayerNorms. A shared tensor appears under every layer's name in
    ``state_dict()``; checkpoints store it once (see :mod:`ptm_core.checkpoints`).
    """

    def attention(index: int = 0) -> nn.Module:
        if config.relative:
            return RelativeMultiHeadAttention(
                config.hidden_size,
                config.num_heads,
                dropout=config.attention_dropout,
                relative_segments=config.segment_encoding == "relative",
            )
        return MultiHeadSelfAttention(
            config.hidden_size,
            config.layer_heads(index),
            dropout=config.attention_dropout,
            bias=config.bias,
            scale=config.attention_scale,
            # Pruned heads (Michel et al., 2019) keep the unpruned width D / h.
            head_dim=None
            if config.heads_per_layer is None
            else config.hidden_size // config.num_heads,
        )

    def feed_forward() -> nn.Module:
        if config.gated_feed_forward:
            return GatedFeedForward(
                config.hidden_size, config.intermediate_size, config.activation, config.bias
            )
        return FeedForward(
            config.hidden_size, config.intermediate_size, config.activation, config.bias
        )

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
        shared = layer(attention(), feed_forward())
        return nn.ModuleList([shared] * count)
    if config.share_layers == "attention":
        shared_attention = attention()
        return nn.ModuleList(layer(shared_attention, feed_forward()) for _ in range(count))
    if config.share_layers == "ffn":
        shared_ffn = feed_forward()
        return nn.ModuleList(layer(attention(), shared_ffn) for _ in range(count))
    return nn.ModuleList(layer(attention(index), feed_forward()) for index in range(count))


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

    Args:
        config: the numbers that define the model (see :class:`EncoderConfig`).

    Example:
        >>> from ptm_core.encoders import bert_tiny
        >>> encoder = bert_tiny()
        >>> out = encoder(torch.tensor([[2, 10, 11, 3]]))
        >>> out.last_hidden_state.shape
        torch.Size([1, 4, 128])
    """

    def __init__(self, config: EncoderConfig) -> None:
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
        self.layers = build_layers(config)
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
        # XLNet's query stream starts from one learned vector at every predicted position.
        self.query_embedding = (
            nn.Parameter(torch.zeros(config.hidden_size)) if config.relative else None
        )
        self.position_dropout = nn.Dropout(config.dropout)
        init_bert_weights(self, config.initializer_range)
        if self.query_embedding is not None:
            nn.init.normal_(self.query_embedding, std=config.initializer_range)
        for module in self.modules():
            if isinstance(module, RelativeMultiHeadAttention):
                module.reset_biases(config.initializer_range)

    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def word_embeddings(self) -> nn.Embedding:
        """The token table; output heads tie their decoder weight to it."""
        return self.embeddings.word

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
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
                visibility; ``None`` = every token sees every token.
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
            memory: relative encoders only: the ``memory`` of the previous segment's
                output (``num_layers`` tensors ``(B, M, D)``); every token may attend it.
            memory_mask: ``(B, M)`` 1/True at the memory positions that hold real tokens
                (the previous segment's padding is hidden); default: all visible.
            query_positions: relative encoders only: ``(B, P)`` positions at which to run
                XLNet's query stream (which knows a token's position, not its content);
                its output is ``query_hidden_state``.
            query_attention_mask: ``(B, P, L)`` bool, what each query-stream position
                may see of the segment's content (True = may attend); needed with
                ``query_positions``. Build it with
                :func:`~ptm_core.modules.attention_masks.permutation_masks`.

        Returns:
            :class:`EncoderOutput`.
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if self.config.relative:
            if output_attention_scores:
                raise ValueError(
                    "output_attention_scores is not available with relative positions; "
                    "use an absolute-position encoder for attention distillation"
                )
            return self._forward_relative(
                input_ids,
                attention_mask,
                token_type_ids,
                inputs_embeds=inputs_embeds,
                extra_embeds=extra_embeds,
                position_ids=position_ids,
                memory=memory,
                memory_mask=memory_mask,
                query_positions=query_positions,
                query_attention_mask=query_attention_mask,
                output_hidden_states=output_hidden_states,
            )
        if memory is not None or memory_mask is not None or query_positions is not None:
            raise ValueError(
                "memory and query_positions need an encoder with position_encoding='relative' "
                "(Transformer-XL / XLNet)"
            )
        hidden = self.embeddings(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            extra_embeds=extra_embeds,
        )  # (B, L, E)
        if self.embedding_projection is not None:
            hidden = self.embedding_projection(hidden)  # (B, L, D)
        mask = to_sdpa_mask(attention_mask, hidden.shape[1])
        if self.relative_position_bias is not None:
            length = hidden.shape[1]
            mask = bias_mask(self.relative_position_bias(length, length), mask)  # (B|1, h, L, L)
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

    def _forward_relative(
        self,
        input_ids: Tensor | None,
        attention_mask: Tensor | None,
        token_type_ids: Tensor | None,
        *,
        inputs_embeds: Tensor | None,
        extra_embeds: Tensor | None,
        position_ids: Tensor | None,
        memory: Sequence[Tensor] | None,
        memory_mask: Tensor | None,
        query_positions: Tensor | None,
        query_attention_mask: Tensor | None,
        output_hidden_states: bool,
    ) -> EncoderOutput:
        """Transformer-XL / XLNet path: relative positions, memory, two streams."""
        config = self.config
        hidden = self.embeddings(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids if config.segment_encoding == "absolute" else None,
            extra_embeds=extra_embeds,
        )
        if self.embedding_projection is not None:
            hidden = self.embedding_projection(hidden)
        batch, length, width = hidden.shape
        memory = list(memory) if memory is not None else None
        if memory is not None and len(memory) != len(self.layers):
            raise ValueError(
                f"memory has {len(memory)} tensors but the encoder has {len(self.layers)} "
                "layers; pass the memory returned by the previous segment's forward"
            )
        memory_length = memory[0].shape[1] if memory else 0
        if memory:
            for index, tensor in enumerate(memory):
                if tensor.shape != (batch, memory_length, width):
                    raise ValueError(
                        f"memory[{index}] has shape {tuple(tensor.shape)}, expected "
                        f"({batch}, {memory_length}, {width}) like memory[0]"
                    )
        keys = memory_length + length
        if memory_mask is not None:
            if memory_mask.shape != (batch, memory_length):
                raise ValueError(
                    f"memory_mask has shape {tuple(memory_mask.shape)}, expected "
                    f"({batch}, {memory_length}) (one flag per memory position)"
                )
            memory_mask = memory_mask.bool()
        content_mask = memory_visibility(attention_mask, batch, length, memory_length, memory_mask)
        segment_diff = None
        if config.segment_encoding == "relative" and token_type_ids is not None:
            # Memory counts as segment 0, as in XLNet.
            types = token_type_ids.expand(batch, length)
            key_types = torch.cat([types.new_zeros(batch, memory_length), types], dim=1)
            segment_diff = types[:, :, None] != key_types[:, None, :]  # (B, L, K)
        positions = self.position_dropout(
            sinusoid_relative_positions(
                length, keys, width, device=hidden.device, dtype=hidden.dtype
            )
        )
        query: Tensor | None = None
        query_mask: Tensor | None = None
        if query_positions is not None:
            if query_attention_mask is None:
                raise ValueError(
                    "query_positions needs query_attention_mask (B, P, L): what each "
                    "query-stream position may see; build it with permutation_masks"
                )
            count = query_positions.shape[1]
            if query_attention_mask.shape != (batch, count, length):
                raise ValueError(
                    f"query_attention_mask has shape {tuple(query_attention_mask.shape)}, "
                    f"expected ({batch}, {count}, {length}) for query_positions of shape "
                    f"{tuple(query_positions.shape)}"
                )
            assert self.query_embedding is not None
            query = self.embeddings.dropout(self.query_embedding.expand(batch, count, width))
            query_mask = query_attention_mask.bool()
            if memory_length:
                seen = (
                    memory_mask[:, None, :].expand(batch, count, memory_length)
                    if memory_mask is not None
                    else query_mask.new_ones(batch, count, memory_length)
                )
                query_mask = torch.cat([seen, query_mask], dim=2)
        new_memory: list[Tensor] = []
        all_hidden: list[Tensor] | None = [hidden] if output_hidden_states else None
        for index, module in enumerate(self.layers):
            layer = cast(TransformerLayer, module)
            layer_memory = memory[index] if memory else None
            if config.memory_length:
                cached = hidden if layer_memory is None else torch.cat([layer_memory, hidden], 1)
                new_memory.append(cached[:, -config.memory_length :].detach())
            attended, attended_query = layer.attention(
                layer.attention_input(hidden),
                positions,
                content_mask,
                memory=layer.attention_input(layer_memory) if layer_memory is not None else None,
                segment_diff=segment_diff,
                query=layer.attention_input(query) if query is not None else None,
                query_positions=query_positions,
                query_mask=query_mask,
            )
            hidden = layer.after_attention(hidden, attended)
            if query is not None:
                query = layer.after_attention(query, attended_query)
            if all_hidden is not None:
                all_hidden.append(hidden)
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
            query = self.final_norm(query) if query is not None else None
        return EncoderOutput(
            last_hidden_state=hidden,
            hidden_states=tuple(all_hidden) if all_hidden is not None else None,
            query_hidden_state=query,
            memory=tuple(new_memory) if config.memory_length else None,
        )

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
        from ptm_core.checkpoints import save_encoder

        return save_encoder(
            self,
            path,
            format=format,
            extra_writers=extra_writers,
            tokenizer=tokenizer,
            heads=heads,
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
        from ptm_core.checkpoints import load_encoder

        return load_encoder(path, strict=strict, **overrides)
