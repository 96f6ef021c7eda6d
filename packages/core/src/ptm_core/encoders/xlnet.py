"""XLNet's encoder: Transformer-XL relative positions, recurrence memory and two streams."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import torch
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.stack_state import LayerMasks, is_per_layer
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder, TransformerLayer
from ptm_core.modules.attention_masks import memory_visibility
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.execution import ExecutionSettings
from ptm_core.modules.relative_attention import (
    RelativeMultiHeadAttention,
    sinusoid_relative_positions,
)

SEGMENT_ENCODINGS = ("absolute", "relative")


@dataclass
class XLNetConfig(EncoderConfig):
    """An :class:`EncoderConfig` with Transformer-XL relative positions and XLNet's switches.

    ``position_encoding`` is ``"relative"`` (the default here);
    :meth:`EncoderConfig.from_dict` builds this class for such a ``config.json``.

    Args:
        segment_encoding: ``"absolute"`` (token-type table, BERT) or ``"relative"``
            (XLNet: attention scores whether query and key are in the same segment; no
            token-type table).
        memory_length: Transformer-XL segment-level recurrence: how many hidden states
            of earlier segments each layer keeps as memory (``0`` = no recurrence). The
            encoder returns the new memory; it is detached (no gradient flows into it).
    """

    position_encoding: Literal["absolute", "relative", "bucketed"] = "relative"
    segment_encoding: Literal["absolute", "relative"] = "absolute"
    memory_length: int = 0

    RELATIVE_FAMILY: ClassVar[bool] = True

    @classmethod
    def claims(cls, data: dict[str, Any]) -> bool:
        """A dict with ``position_encoding="relative"`` is an XLNet encoder's."""
        return data.get("position_encoding") == "relative"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.relative:
            raise ValueError(
                "XLNetConfig.position_encoding must be 'relative' (Transformer-XL), got "
                f"{self.position_encoding!r}; other encoders are an EncoderConfig"
            )
        if self.segment_encoding not in SEGMENT_ENCODINGS:
            raise ValueError(
                "XLNetConfig.segment_encoding must be 'absolute' or 'relative', "
                f"got {self.segment_encoding!r}"
            )
        if not isinstance(self.memory_length, int) or self.memory_length < 0:
            raise ValueError(
                f"XLNetConfig.memory_length must be an integer >= 0, got {self.memory_length!r}"
            )

    @property
    def segment_table_size(self) -> int:
        """No token-type table with relative segments (they enter every attention layer)."""
        return 0 if self.segment_encoding == "relative" else self.type_vocab_size


def relative_attention(config: XLNetConfig) -> RelativeMultiHeadAttention:
    """One layer's Transformer-XL attention (with XLNet's relative segments when set)."""
    return RelativeMultiHeadAttention(
        config.hidden_size,
        config.num_heads,
        dropout=config.attention_dropout,
        relative_segments=config.segment_encoding == "relative",
    )


class XLNetEncoder(TransformerEncoder):
    """XLNet's encoder (Yang et al., 2019) on Transformer-XL attention (Dai et al., 2019).

    The embeddings (no position table; no segment table with relative segments) and the
    layer stack are :class:`TransformerEncoder`'s; every layer's attention is a
    :class:`~ptm_core.modules.relative_attention.RelativeMultiHeadAttention`. On top of
    the BERT path it has segment-level recurrence (``memory``), relative segments and
    the two-stream attention of permutation LM: the query stream starts from one learned
    vector (``query_embedding``) at ``query_positions`` and shares every layer weight with
    the content stream.

    Args:
        config: an :class:`XLNetConfig`.
        settings: the kernels it runs with (see :class:`TransformerEncoder`).
    """

    config: XLNetConfig

    def __init__(self, config: XLNetConfig, *, settings: ExecutionSettings | None = None) -> None:
        if not isinstance(config, XLNetConfig):
            raise ValueError(
                "XLNetEncoder needs an XLNetConfig (position_encoding='relative'), got "
                f"position_encoding={config.position_encoding!r}; build it with "
                "encoder_from_config(config)"
            )
        super().__init__(
            config, attention=lambda index: relative_attention(config), settings=settings
        )
        # The query stream starts from one learned vector at every predicted position.
        self.query_embedding = nn.Parameter(torch.zeros(config.hidden_size))
        self.position_dropout = Dropout(config.dropout, kernel=self.settings.dropout_kernel)
        nn.init.normal_(self.query_embedding, std=config.initializer_range)
        for module in self.modules():
            if isinstance(module, RelativeMultiHeadAttention):
                module.reset_biases(config.initializer_range)

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
        """Encode a segment (arguments as :meth:`TransformerEncoder.forward`).

        Args:
            memory: the ``memory`` of the previous segment's output (``num_layers``
                tensors ``(B, M, D)``); every token may attend it.
            memory_mask: ``(B, M)`` 1/True at the memory positions that hold real tokens.
            query_positions: ``(B, P)`` positions at which to run the query stream (which
                knows a token's position, not its content); its output is
                ``query_hidden_state``.
            query_attention_mask: ``(B, P, L)`` bool, what each query-stream position may
                see of the segment's content; build it with
                :func:`~ptm_core.modules.attention_masks.permutation_masks`.
            output_attention_scores: not available (raises).
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if is_per_layer(attention_mask):
            raise ValueError(
                "a per-layer attention_mask needs the absolute-position TransformerEncoder; "
                "XLNetEncoder takes one mask for every layer"
            )
        if output_attention_scores:
            raise ValueError(
                "output_attention_scores is not available with relative positions; "
                "use an absolute-position encoder for attention distillation"
            )
        config = self.config
        hidden = self.embed(
            input_ids,
            inputs_embeds=inputs_embeds,
            position_ids=position_ids,
            token_type_ids=token_type_ids if config.segment_encoding == "absolute" else None,
            extra_embeds=extra_embeds,
        )
        batch, length, width = hidden.shape
        memory, memory_mask = self._check_memory(memory, memory_mask, batch, width)
        memory_length = memory[0].shape[1] if memory else 0
        keys = memory_length + length
        if isinstance(attention_mask, AttentionStructure):
            # The relative two-stream attention adds a positional term: it stays on the
            # dense boolean path.
            attention_mask.check_length(length)
            attention_mask = attention_mask.to(hidden.device).dense()
        content_mask = memory_visibility(
            cast(Tensor | None, attention_mask), batch, length, memory_length, memory_mask
        )
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
        query, query_mask = self._query_stream(
            query_positions, query_attention_mask, memory_mask, batch, length, memory_length
        )
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

    def _check_memory(
        self,
        memory: Sequence[Tensor] | None,
        memory_mask: Tensor | None,
        batch: int,
        width: int,
    ) -> tuple[list[Tensor] | None, Tensor | None]:
        """The previous segment's memory as a list, and its mask as bool, both checked."""
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
        if memory_mask is not None:
            if memory_mask.shape != (batch, memory_length):
                raise ValueError(
                    f"memory_mask has shape {tuple(memory_mask.shape)}, expected "
                    f"({batch}, {memory_length}) (one flag per memory position)"
                )
            memory_mask = memory_mask.bool()
        return memory, memory_mask

    def _query_stream(
        self,
        query_positions: Tensor | None,
        query_attention_mask: Tensor | None,
        memory_mask: Tensor | None,
        batch: int,
        length: int,
        memory_length: int,
    ) -> tuple[Tensor | None, Tensor | None]:
        """The query stream's input ``(B, P, D)`` and what it sees ``(B, P, M + L)``
        (every real memory position, then ``query_attention_mask``); ``None`` without
        ``query_positions``."""
        if query_positions is None:
            return None, None
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
        width = self.config.hidden_size
        query = self.embeddings.dropout(self.query_embedding.expand(batch, count, width))
        query_mask = query_attention_mask.bool()
        if memory_length:
            seen = (
                memory_mask[:, None, :].expand(batch, count, memory_length)
                if memory_mask is not None
                else query_mask.new_ones(batch, count, memory_length)
            )
            query_mask = torch.cat([seen, query_mask], dim=2)
        return query, query_mask
