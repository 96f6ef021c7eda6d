"""Soft prompts and prefixes on an encoder-decoder (BART, T5, MASS).

- :class:`SoftPromptSeq2Seq`: prompt tuning (Lester et al., 2021, whose model is T5).
  ``P`` trained vectors go before the encoder's input vectors; the encoder runs over
  ``P + S`` positions and its output keeps all of them, so the decoder's cross-attention
  reads the prompt's states as well (the memory's padding mask gets ``P`` real columns in
  front). The decoder is unchanged, so a classification head on the decoder's last end
  token reads the same position as without a prompt.
- :func:`add_seq2seq_prefixes`: prefix tuning (Li & Liang, 2021, whose model is BART).
  Every layer gets trained keys and values in its three attentions: encoder
  self-attention and decoder self-attention (:class:`~ptm_core.peft.prompts.PrefixAttention`)
  and decoder cross-attention (:class:`PrefixCrossAttention`). The prefixes sit in front
  of the keys and values each attention computes, with their own columns of the mask
  always visible (the reference code's ``prev_key`` + ``prev_key_padding_mask`` of
  zeros); positions of the real tokens do not move.

Both work with the decoder's key/value cache in generation: the prompt is part of the
memory the cache projects once; the cross-attention prefix is projected into the cache's
cross keys once; the decoder self-attention prefix is put in front at every step and never
stored in the cache (so it is never there twice).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.encoders import generation
from ptm_core.encoders.decoder import DecoderCache
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel, Seq2SeqOutput
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.encoders.output import EncoderOutput
from ptm_core.modules.cross_attention import MultiHeadCrossAttention
from ptm_core.peft.prompts import (
    PrefixAttention,
    PrefixKeyValues,
    add_prefixes,
    prefix_heads,
    prefix_visible,
    prompt_mask,
    vocabulary_prompt,
)


class SoftPromptSeq2Seq(nn.Module):
    """An encoder-decoder with ``P`` trained vectors before every encoder input
    (Lester et al., 2021).

    The prompt starts from ``P`` token vectors drawn from the vocabulary. It is put before
    the scaled token vectors (:meth:`EncoderDecoderModel.embed_source`, which BART scales
    by ``sqrt(D)`` when ``scale_embedding``; the prompt is used as stored, as peft's
    ``PROMPT_TUNING`` does), takes learned positions ``0 .. P-1`` (tokens follow at
    ``P ..``; T5's relative buckets just see ``P + S`` positions). It offers what task
    models and generation call on an :class:`EncoderDecoderModel` (``encode``, ``decode``,
    ``forward``, ``generate``, ``decode_step``, ``init_decoder_cache``, ``logits``,
    ``config``); the memory masks they pass, ``(B, S)`` over the source tokens, are widened
    to ``(B, P + S)`` here.

    Args:
        model: the frozen encoder-decoder.
        num_virtual_tokens: ``P``.

    Shapes:
        ``encode``: ``input_ids`` ``(B, S)`` -> memory ``(B, P + S, D)``; ``forward``:
        logits ``(B, T, V)`` as :class:`EncoderDecoderModel`.
    """

    def __init__(self, model: EncoderDecoderModel, num_virtual_tokens: int) -> None:
        super().__init__()
        self.model = model
        self.config: Seq2SeqConfig = model.config  # what task models and generation read
        self.num_virtual_tokens = num_virtual_tokens
        self.prompt = nn.Parameter(
            vocabulary_prompt(model.encoder.embeddings.word.weight, num_virtual_tokens)
        )  # (P, D)

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput:
        """Encoder states ``(B, P + S, D)``: the prompt's, then the tokens'."""
        batch, length = input_ids.shape
        count = self.num_virtual_tokens
        room = self.config.max_positions - count
        if length > room:
            raise ValueError(
                f"a source of {length} tokens plus {count} prompt vectors exceeds the "
                f"encoder-decoder's max_positions={self.config.max_positions}; lower "
                f"task.max_length to {room} or finetune.peft_virtual_tokens"
            )
        words = self.model.embed_source(input_ids)  # (B, S, D)
        prompt = self.prompt.to(words.dtype).unsqueeze(0).expand(batch, -1, -1)  # (B, P, D)
        return self.model.encode_embeds(
            torch.cat([prompt, words], dim=1), prompt_mask(attention_mask, count)
        )

    def memory_mask(self, attention_mask: Tensor | None) -> Tensor | None:
        """The source padding ``(B, S)`` as the memory's ``(B, P + S)``."""
        if attention_mask is None:
            return None
        if attention_mask.dim() != 2:
            raise ValueError(
                "an encoder-decoder's memory mask is (B, S) source padding, got "
                f"{tuple(attention_mask.shape)}"
            )
        return prompt_mask(attention_mask, self.num_virtual_tokens)

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        memory_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Decoder states and logits over ``memory`` from :meth:`encode`;
        ``memory_attention_mask`` is the source padding ``(B, S)``."""
        return self.model.decode(
            decoder_input_ids,
            memory,
            self.memory_mask(memory_attention_mask),
            decoder_attention_mask,
        )

    def logits(self, hidden: Tensor) -> Tensor:
        """The wrapped model's LM head."""
        return self.model.logits(hidden)

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Seq2SeqOutput:
        """Teacher-forced pass; ``encoder_hidden_state`` holds the prompt's states too."""
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        hidden, logits = self.decode(
            decoder_input_ids, memory, attention_mask, decoder_attention_mask
        )
        return Seq2SeqOutput(logits, hidden, memory)

    def decode_step(
        self, decoder_input_ids: Tensor, cache: DecoderCache
    ) -> tuple[Tensor, DecoderCache]:
        """One cached decoding step (the cache already holds the widened memory mask)."""
        return self.model.decode_step(decoder_input_ids, cache)

    def init_decoder_cache(
        self, memory: Tensor, memory_attention_mask: Tensor | None = None
    ) -> DecoderCache:
        """An empty decoder cache over ``memory`` ``(N, P + S, D)`` and the source padding
        ``(N, S)``."""
        return self.model.init_decoder_cache(memory, self.memory_mask(memory_attention_mask))

    @torch.no_grad()
    def generate(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, **options: Any
    ) -> list[list[int]]:
        """Greedy or beam-search decoding with the prompt
        (:meth:`EncoderDecoderModel.generate`'s options)."""
        return generation.generate(self, input_ids, attention_mask, **options)


class PrefixCrossAttention(PrefixKeyValues):
    """Cross-attention that attends ``P`` trained keys and values before the memory's
    (Li & Liang, 2021: the reference code's ``encoder_decoder`` prefix).

    The prefix is put in front of the projected memory in :meth:`project_memory`, so the
    decoder's cache holds it once per generation, and :meth:`attend` widens the memory mask
    by ``P`` visible columns. Parameters ``prefix_key``/``prefix_value`` ``(P, h d)``, as
    :class:`~ptm_core.peft.prompts.PrefixAttention`'s.

    Args:
        attention: the frozen cross-attention block.
        num_virtual_tokens: ``P``.

    Shapes:
        hidden ``(B, Lq, D)``, memory ``(B, S, D)``; keys/values ``(B, h, P + S, d)``;
        mask ``None`` or bool ``(B or 1, 1, 1 or Lq, S)`` over the memory; output
        ``(B, Lq, D)``.
    """

    attention: MultiHeadCrossAttention

    def __init__(self, attention: MultiHeadCrossAttention, num_virtual_tokens: int) -> None:
        super().__init__(attention, num_virtual_tokens)

    def forward(self, hidden_states: Tensor, memory: Tensor, mask: Tensor | None = None) -> Tensor:
        return self.attend(hidden_states, *self.project_memory(memory), mask)

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """The prefix, then the memory's keys and values: each ``(B, h, P + S, d)``."""
        key, value = self.attention.project_memory(memory)
        batch, heads, _, width = key.shape
        return (
            torch.cat([prefix_heads(self.prefix_key, batch, heads, width, key.dtype), key], 2),
            torch.cat(
                [prefix_heads(self.prefix_value, batch, heads, width, value.dtype), value], 2
            ),
        )

    def attend(
        self, hidden_states: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """Attend over keys/values of :meth:`project_memory`; ``mask`` covers the memory's
        ``S`` columns (the prefix's are added, visible)."""
        return self.attention.attend(
            hidden_states, key, value, prefix_visible(mask, self.num_virtual_tokens)
        )


def add_seq2seq_prefixes(model: EncoderDecoderModel, num_virtual_tokens: int) -> int:
    """Prefixes in every attention of an encoder-decoder (in place): encoder
    self-attention, decoder self-attention and decoder cross-attention.

    Returns:
        How many attention blocks were wrapped.
    """
    count = add_prefixes(model.encoder, num_virtual_tokens)
    decoder: Any = model.decoder
    for index, layer in enumerate(decoder.layers):
        for name, wrapper in (
            ("self_attention", PrefixAttention),
            ("cross_attention", PrefixCrossAttention),
        ):
            attention = getattr(layer, name)
            if isinstance(attention, (PrefixAttention, PrefixCrossAttention)):
                raise ValueError(f"decoder layer {index}'s {name} already carries a prefix")
            setattr(layer, name, wrapper(attention, num_virtual_tokens))
            count += 1
    return count


def attach_seq2seq_prompts(model: nn.Module, attribute: str, method: str, count: int) -> None:
    """Put ``method`` (``prompt`` or ``prefix``) on the encoder-decoder ``model.<attribute>``
    (frozen already): a :class:`SoftPromptSeq2Seq` in its place, or prefixes in its layers.

    Raises:
        ValueError: ``model.<attribute>`` is not an :class:`EncoderDecoderModel`.
    """
    network = getattr(model, attribute)
    if not isinstance(network, EncoderDecoderModel):
        raise ValueError(
            f"finetune.peft={method} on {type(model).__name__}.{attribute} needs an "
            f"encoder-decoder (BART, T5, MASS), not {type(network).__name__}; use "
            "finetune.peft=lora or ia3"
        )
    if method == "prompt":
        setattr(model, attribute, SoftPromptSeq2Seq(network, count))
    else:
        add_seq2seq_prefixes(network, count)
