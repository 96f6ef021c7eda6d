"""The Transformer encoder stack every ptm model stands on."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.layers import TransformerLayer, build_layers, standard_norm
from ptm_core.encoders.output import EncoderOutput
from ptm_core.encoders.stack_state import LayerMasks, StackState, mask_of_layer
from ptm_core.encoders.unpadding import unpad_layout
from ptm_core.model_kinds import ENCODER, XLNET
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import to_sdpa_mask
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.execution import ExecutionConfigurable, ExecutionSettings
from ptm_core.modules.initialization import init_bert_weights
from ptm_core.modules.positions import RelativePositionBias, bias_mask

if TYPE_CHECKING:
    from ptm_core.tokenization import WordPieceTokenizer

__all__ = ["EncoderOutput", "TransformerEncoder", "TransformerLayer", "build_layers"]


class TransformerEncoder(nn.Module):
    """Bidirectional Transformer encoder (BERT, Devlin et al., 2019).

    Embeddings (token + position + segment) followed by ``num_layers`` Transformer layers.
    ALBERT (Lan et al., 2020) and ELECTRA (Clark et al., 2020) switches: factorised
    embeddings (``embedding_size`` ``E`` != ``D``: ``V x E`` tables and an ``E -> D``
    projection, ``embedding_projection``) and cross-layer sharing (``share_layers``).
    Every visibility pattern is a boolean ``attention_mask``: ``[B, L]`` key padding or
    ``[B, L, L]`` visibility (True = row may attend column), an
    :class:`~ptm_core.modules.attention_structure.AttentionStructure`, or one of those per
    layer (a list of ``num_layers`` masks, or a function of the layer index: local/global
    alternation, per-layer visibility). Extension packages compose this encoder (soft
    positions via ``position_ids``, language or visual embeddings via
    ``inputs_embeds``/``extra_embeds``) rather than subclassing it.

    **Seams.** A model that needs something between two layers (knowledge fusion,
    co-attention, a cross-modal layer) either passes it in, ``insert={k: module}`` (run
    just before layer ``k``; ``k = num_layers`` runs after the last layer, before the
    final norm; called as ``module(hidden (B, L, D), mask) -> (B, L, D)`` with layer ``k``'s
    mask), or drives the stack itself::

        state = encoder.start(input_ids, attention_mask)   # embeddings, projection, layout
        state = encoder.run_layers(state, 6)               # layers 0..5
        state.set_padded(fuse(state.padded(), other))      # anything, on (B, L, D)
        out = encoder.finish(state)                         # layers 6.., final norm

    Both go through the same embeddings, ``E -> D`` projection, :meth:`layer_mask`,
    unpadding and attention backends as :meth:`forward`, which is exactly
    ``finish(start(...))``.

    This class is the absolute-position encoder (and T5's bucketed bias). Transformer-XL /
    XLNet relative positions and two-stream attention are
    :class:`~ptm_core.encoders.XLNetEncoder`, a subclass that reuses the embeddings and the
    layer stack; build from a config with :func:`~ptm_core.encoders.encoder_from_config`
    (``TransformerEncoder(config)`` with relative positions is refused, naming it).

    Args:
        config: the numbers that define the model (see :class:`EncoderConfig`).
        attention: builds layer ``index``'s attention block (see :func:`build_layers`);
            default :func:`standard_attention`. Subclasses pass their own.
        feed_forward: builds a feed-forward block; default :func:`standard_feed_forward`.
        norm: builds each layer's norms and the pre-LN final norm; default
            :func:`standard_norm` (LayerNorm). T5 passes RMSNorm.
        position_bias: builds the bucketed bias of ``position_encoding="bucketed"``; default
            T5's :class:`~ptm_core.modules.positions.RelativePositionBias` (32 buckets, 128).
        insert: modules run between layers (see Seams); their parameters are the
            encoder's (``inserted.<k>.*`` in the state dict).
        settings: the kernels it runs with (:class:`ExecutionSettings`: attention backend,
            unpadding, dropout kernel); a run may change them once through
            :meth:`apply_execution_settings`. Checkpoints do not store them.

    Unpadding: with a ``[B, L]`` padding mask the stack can run on the real tokens only
    and re-pad at the end (``settings.unpadding``, default ``"auto"``: when the batch has
    at least ``AUTO_MIN_PADDING`` = 30% padding; see :mod:`ptm_core.encoders.unpadding`).
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
        self,
        config: EncoderConfig,
        *,
        attention: Callable[[int], nn.Module] | None = None,
        feed_forward: Callable[[], nn.Module] | None = None,
        norm: Callable[[], nn.Module] | None = None,
        position_bias: Callable[[], nn.Module] | None = None,
        insert: Mapping[int, nn.Module] | None = None,
        settings: ExecutionSettings | None = None,
    ) -> None:
        super().__init__()
        self.config = config
        self.settings = settings or ExecutionSettings()
        self.embeddings = TextEmbeddings(
            vocab_size=config.vocab_size,
            hidden_size=config.embedding_width,
            max_positions=config.max_positions,
            type_vocab_size=config.segment_table_size,
            dropout=config.dropout,
            layer_norm_eps=config.layer_norm_eps,
            layer_norm=config.embedding_layer_norm,
            pad_token_id=config.pad_token_id,
            absolute_positions=config.position_encoding == "absolute",
        )
        self.embedding_projection = (
            nn.Linear(config.embedding_width, config.hidden_size) if config.factorised else None
        )
        make_norm = norm or (lambda: standard_norm(config))
        self.layers = build_layers(
            config, attention, feed_forward=feed_forward, norm=make_norm, settings=self.settings
        )
        self.final_norm = make_norm() if config.norm_position == "pre" else None
        if position_bias is not None and not config.bucketed:
            raise ValueError(
                "TransformerEncoder: position_bias is T5's bucketed bias; it needs "
                f"position_encoding='bucketed', got {config.position_encoding!r}"
            )
        # T5: one bucketed position bias for the whole stack, added in every layer.
        bias = position_bias or (lambda: RelativePositionBias(config.num_heads, bidirectional=True))
        self.relative_position_bias = bias() if config.bucketed else None
        init_bert_weights(self, config.initializer_range)
        # Inserted after the stack's own initialisation: an inserted module keeps the
        # weights it was built with, and the stack's own weights do not depend on it.
        for position in insert or {}:
            if not 0 <= position <= config.num_layers:
                raise ValueError(
                    f"insert position {position} is outside 0..num_layers={config.num_layers} "
                    "(k runs just before layer k; num_layers runs after the last layer)"
                )
        self.inserted = nn.ModuleDict({str(k): m for k, m in sorted((insert or {}).items())})
        # Inserted modules and attention blocks a subclass built (XLNet's) run with the
        # stack's kernels, as its own layers do.
        self.apply_execution_settings(self.settings)

    @property
    def unpadding_mode(self) -> str:
        """``"auto"``, ``"on"`` or ``"off"``: ``settings.unpadding``."""
        return self.settings.unpadding

    def apply_execution_settings(self, settings: ExecutionSettings) -> None:
        """Run with ``settings`` from now on (the Trainer calls this once, at the start).

        The attention backend goes to every layer's and inserted module's attention, the
        unpadding mode to the stack; the dropout kernel, when ``settings`` names one, to
        every dropout the stack built (otherwise each keeps the kernel it was built with).
        """
        kernel = settings.dropout_kernel or self.settings.dropout_kernel
        self.settings = dataclasses.replace(settings, dropout_kernel=kernel)
        for module in (*self.layers, *self.inserted.values()):
            if isinstance(module, ExecutionConfigurable):
                module.apply_execution_settings(settings)
        self._set_dropout_kernels(settings.dropout_kernel)

    def _set_dropout_kernels(self, kernel: str | None) -> None:
        # The embeddings are built from numbers only; their dropout takes the kernel here.
        if kernel is not None:
            self.embeddings.dropout.kernel = kernel

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
        attention_mask: LayerMasks = None,
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
                run through ``settings.attention_backend``. Or one mask per layer: a list of
                ``num_layers`` masks, or a function of the layer index (padded path).
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
        state = self.start(
            input_ids,
            attention_mask,
            position_ids,
            token_type_ids,
            inputs_embeds=inputs_embeds,
            extra_embeds=extra_embeds,
            output_hidden_states=output_hidden_states,
            output_attention_scores=output_attention_scores,
        )
        return self.finish(state)

    def start(
        self,
        input_ids: Tensor | None = None,
        attention_mask: LayerMasks = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
        extra_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attention_scores: bool = False,
    ) -> StackState:
        """Embed a batch and choose its path (unpadded or padded): the state before layer 0.

        Takes :meth:`forward`'s arguments; ``attention_mask`` may also be per layer
        (:data:`~ptm_core.encoders.stack_state.LayerMasks`).
        """
        hidden = self.embed(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            extra_embeds=extra_embeds,
        )  # (B, L, D)
        length = hidden.shape[1]
        layout = unpad_layout(
            self.settings.unpadding,
            attention_mask,
            length,
            stack_can_unpad=self._can_unpad() and not output_attention_scores,
        )
        if layout is not None:
            hidden = layout.unpad(hidden)  # (T, D)
        return StackState(
            hidden=hidden,
            attention_mask=attention_mask,
            layout=layout,
            length=length,
            hidden_states=[hidden] if output_hidden_states else None,
            attention_scores=[] if output_attention_scores else None,
        )

    def run_layers(self, state: StackState, stop: int | None = None) -> StackState:
        """Run layers ``state.layers_done .. stop - 1`` (and the modules inserted before
        them); ``stop=None`` = to the last layer. Returns ``state``, advanced."""
        count = len(self.layers)
        stop = count if stop is None else stop
        if not state.layers_done <= stop <= count:
            raise ValueError(
                f"run_layers: stop={stop} must be between the layers done "
                f"({state.layers_done}) and num_layers={count}"
            )
        for index in range(state.layers_done, stop):
            self._run_inserted(state, index)
            layer = cast(TransformerLayer, self.layers[index])
            if state.layout is not None:
                state.hidden = layer.forward_unpadded(state.hidden, state.layout)
            elif state.attention_scores is not None:
                state.hidden, scores = layer(state.hidden, self._mask(state, index), True)
                state.attention_scores.append(scores)
            else:
                state.hidden = layer(state.hidden, self._mask(state, index))
            if state.hidden_states is not None:
                state.hidden_states.append(state.hidden)
            state.layers_done = index + 1
        return state

    def finish(self, state: StackState) -> EncoderOutput:
        """Run the remaining layers, the module inserted after the last one and the final
        norm; re-pad. Returns :meth:`forward`'s :class:`EncoderOutput`."""
        self.run_layers(state)
        self._run_inserted(state, len(self.layers))
        hidden = state.hidden
        if self.final_norm is not None:
            hidden = self.final_norm(hidden)
        layout = state.layout
        states = state.hidden_states
        if layout is not None:
            hidden = layout.repad(hidden)
            states = [layout.repad(h) for h in states] if states is not None else None
        return EncoderOutput(
            last_hidden_state=hidden,
            hidden_states=tuple(states) if states is not None else None,
            attention_scores=(
                tuple(state.attention_scores) if state.attention_scores is not None else None
            ),
        )

    def _run_inserted(self, state: StackState, position: int) -> None:
        if str(position) not in self.inserted:
            return
        module = self.inserted[str(position)]
        index = min(position, len(self.layers) - 1)
        state.set_padded(module(state.padded(), self._mask(state, index, padded=True)))

    def _can_unpad(self) -> bool:
        return self.relative_position_bias is None and all(
            isinstance(layer.attention, MultiHeadSelfAttention) for layer in self.layers
        )

    def _mask(
        self, state: StackState, index: int, *, padded: bool = False
    ) -> Tensor | AttentionStructure | None:
        # Layer `index`'s mask as its attention takes it; each distinct mask is resolved
        # once per batch (every layer shares it in the common case).
        raw = mask_of_layer(state.attention_mask, index, len(self.layers))
        if state.layout is not None and not padded:
            return None
        cached = state.resolved_masks.get(id(raw))
        if cached is not None and cached[0] is raw:
            return cached[1]
        reference = state.hidden if state.layout is None else state.padded()
        resolved = self.layer_mask(raw, reference)
        state.resolved_masks[id(raw)] = (raw, resolved)
        return resolved

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
