"""Encoder-decoder Transformer (BART/MASS/T5 layout).

The config is :mod:`ptm_core.encoders.encoder_decoder_config`, greedy and beam-search
decoding :mod:`ptm_core.encoders.generation`. Saving and loading are done by the checkpoint
layer (:mod:`ptm_core.checkpoints.seq2seq`), which this module names but never imports
statically: the checkpoint code imports the model, not the other way round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ptm_core.checkpoints import registry
from ptm_core.encoders import generation
from ptm_core.encoders.decoder import DecoderCache, TransformerDecoder
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.encoders.layers import standard_attention, standard_feed_forward, standard_norm
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.model_kinds import ENCODER_DECODER
from ptm_core.modules.initialization import init_bert_weights, init_t5_weights
from ptm_core.modules.positions import RelativePositionBias

#: The checkpoint module that saves and loads :class:`EncoderDecoderModel` (resolved by name).

__all__ = ["EncoderDecoderModel", "Seq2SeqOutput", "build_encoder_decoder", "seq2seq_encoder"]


def seq2seq_encoder(config: Seq2SeqConfig) -> TransformerEncoder:
    """The encoder half: the core encoder of :meth:`Seq2SeqConfig.encoder_config`'s shape,
    with the blocks of :meth:`Seq2SeqConfig.blocks` (BART's, or T5's RMS norms, bias-free
    unscaled attention, gated MLP) and, for ``"t5_buckets"``, the bidirectional bias of
    :meth:`Seq2SeqConfig.buckets`, passed in."""
    shape = config.encoder_config()
    blocks = config.blocks()
    buckets = config.buckets()
    return TransformerEncoder(
        shape,
        attention=lambda index: standard_attention(
            shape, index, bias=blocks.bias, scale=blocks.attention_scale
        ),
        feed_forward=lambda: standard_feed_forward(
            shape, bias=blocks.bias, gated=blocks.gated_feed_forward
        ),
        norm=lambda: standard_norm(shape, blocks.norm_type),
        position_bias=(
            (
                lambda: RelativePositionBias(
                    shape.num_heads, buckets.num_buckets, buckets.max_distance, bidirectional=True
                )
            )
            if config.bucketed
            else None
        ),
    )


@dataclass
class Seq2SeqOutput:
    """What :class:`EncoderDecoderModel` returns.

    Attributes:
        logits: ``(B, T, V)`` next-token scores.
        decoder_hidden_state: ``(B, T, D)``.
        encoder_hidden_state: ``(B, S, D)``.
    """

    logits: Tensor
    decoder_hidden_state: Tensor
    encoder_hidden_state: Tensor


class EncoderDecoderModel(nn.Module):
    """Transformer encoder-decoder with an LM head (Vaswani et al., 2017; BART, Lewis et al., 2020).

    The encoder is the core :class:`~ptm_core.encoders.TransformerEncoder`; the decoder is
    :class:`~ptm_core.encoders.decoder.TransformerDecoder` (causal self-attention +
    cross-attention). Token tables are shared across encoder, decoder and head when
    ``share_embeddings``; learned absolute positions start at ``position_offset``.
    ``final_logits_bias`` is a buffer, as in ``BartForConditionalGeneration``. The T5
    layout (Raffel et al., 2020) is a set of :class:`Seq2SeqConfig` switches of the same
    layers: bucketed relative position bias, RMS norms, no biases, no attention scaling.

    Args:
        config: :class:`Seq2SeqConfig`.

    Shapes:
        input_ids ``(B, S)``, decoder_input_ids ``(B, T)``, logits ``(B, T, V)``.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = seq2seq_encoder(config)
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        self.decoder = TransformerDecoder(
            config.vocab_size,
            config.hidden_size,
            config.decoder_layers,
            config.num_heads,
            config.intermediate_size,
            config.max_positions,
            config.position_offset,
            config.dropout,
            config.attention_dropout,
            config.activation,
            config.layer_norm_eps,
            config.norm_position,
            config.pad_token_id,
            self.embed_scale,
            position_encoding=config.position_encoding,
            relative_attention_num_buckets=config.relative_attention_num_buckets,
            relative_attention_max_distance=config.relative_attention_max_distance,
            norm_type=config.norm_type,
            bias=config.bias,
            attention_scale=config.attention_scale,
            gated_feed_forward=config.gated_feed_forward,
            embedding_layer_norm=config.embedding_layer_norm,
        )
        if config.share_embeddings:
            self.decoder.embeddings.word = self.encoder.embeddings.word
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.register_buffer("final_logits_bias", torch.zeros(1, config.vocab_size))
        init_bert_weights(self, config.initializer_range)
        if config.tie_lm_head:
            self.lm_head.weight = self.decoder.embeddings.word.weight
        if config.initialization == "t5":
            init_t5_weights(self, config.hidden_size)
        self.output_scale = config.hidden_size**-0.5 if config.scale_decoder_output else 1.0

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput:
        """Encoder states ``(B, S, D)`` for ``input_ids`` ``(B, S)``."""
        return self.encode_embeds(self.embed_source(input_ids), attention_mask)

    def embed_source(self, input_ids: Tensor) -> Tensor:
        """The encoder's token vectors ``(B, S, D)`` (times ``sqrt(D)`` with
        ``scale_embedding``), before positions: what :meth:`encode_embeds` reads."""
        return self.encoder.embeddings.word(input_ids) * self.embed_scale

    def encode_embeds(self, embeds: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput:
        """Encoder states ``(B, S, D)`` for input vectors ``(B, S, D)`` at positions
        ``0 .. S-1``: the seam for vectors that are not tokens (soft prompts,
        :mod:`ptm_core.peft.seq2seq_prompts`).

        Args:
            embeds: ``(B, S, D)``, scaled as :meth:`embed_source` scales token vectors.
            attention_mask: ``(B, S)`` padding (1 = real) or ``(B, S, S)`` visibility.
        """
        length = embeds.shape[1]
        if length > self.config.max_positions:
            raise ValueError(
                f"encoder input of {length} tokens is longer than max_positions="
                f"{self.config.max_positions}; truncate it or raise max_positions"
            )
        positions = (
            torch.arange(length, device=embeds.device)[None, :] + self.config.position_offset
            if not self.config.bucketed
            else None
        )
        return self.encoder(
            inputs_embeds=embeds, attention_mask=attention_mask, position_ids=positions
        )

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        memory_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Decoder states ``(B, T, D)`` and logits ``(B, T, V)``."""
        hidden = self.decoder(
            decoder_input_ids, memory, decoder_attention_mask, memory_attention_mask
        )
        return hidden, self.logits(hidden)

    def logits(self, hidden: Tensor) -> Tensor:
        """LM head on decoder states ``(B, T, D)`` -> ``(B, T, V)`` (T5 v1.0 scales the
        states by ``D ** -0.5`` first when ``scale_decoder_output``)."""
        if self.output_scale != 1.0:
            hidden = hidden * self.output_scale
        return self.lm_head(hidden) + self.final_logits_bias

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Seq2SeqOutput:
        """Teacher-forced forward pass; see :class:`Seq2SeqOutput`."""
        memory = self.encode(input_ids, attention_mask).last_hidden_state
        hidden, logits = self.decode(
            decoder_input_ids, memory, attention_mask, decoder_attention_mask
        )
        return Seq2SeqOutput(logits, hidden, memory)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        max_length: int = 64,
        num_beams: int = 1,
        eos_token_id: int | None = None,
        decoder_start_token_id: int | None = None,
        length_penalty: float = 1.0,
        use_cache: bool = True,
    ) -> list[list[int]]:
        """Greedy (``num_beams=1``) or beam-search decoding.

        With ``use_cache`` (the default) the decoder keeps a key/value cache
        (:class:`~ptm_core.encoders.decoder.DecoderCache`): the cross-attention keys/values
        of the encoder output are projected once per call, and each step runs the decoder
        on the newest token only, attending over the cached self-attention keys/values of
        the earlier ones; beam search reorders the cache rows as it re-selects beams. Beam
        search decodes the beams of every source in one batch per step.
        ``use_cache=False`` re-runs the decoder on the whole prefix at every step (the
        reference; quadratic in the output length). Both give the same tokens up to float
        rounding of the step logits (about 1e-6).

        Args:
            input_ids: ``(B, S)`` source ids.
            attention_mask: ``(B, S)`` source padding.
            max_length: most generated tokens (start token not counted).
            num_beams: beam width.
            eos_token_id: stop token (default ``config.eos_token_id``); kept in the output.
            decoder_start_token_id: first decoder input (default from the config).
            length_penalty: beams are ranked by ``sum log p / length ** length_penalty``.
            use_cache: decode incrementally with a key/value cache (see above).

        Returns:
            For each row, the generated ids without the start token.
        """
        return generation.generate(
            self,
            input_ids,
            attention_mask,
            max_length=max_length,
            num_beams=num_beams,
            eos_token_id=eos_token_id,
            decoder_start_token_id=decoder_start_token_id,
            length_penalty=length_penalty,
            use_cache=use_cache,
        )

    def decode_step(
        self, decoder_input_ids: Tensor, cache: DecoderCache
    ) -> tuple[Tensor, DecoderCache]:
        """Logits of ``T`` new decoder tokens with a key/value cache.

        Args:
            decoder_input_ids: ``(N, T)`` tokens after the ``P`` cached positions.
            cache: from :meth:`init_decoder_cache` or a previous call.

        Returns:
            Logits ``(N, T, V)`` (equal to the last ``T`` of :meth:`decode` on the whole
            prefix, to float rounding) and the cache with ``P + T`` positions.
        """
        hidden, cache = self.decoder.step(decoder_input_ids, cache)
        return self.logits(hidden), cache

    def init_decoder_cache(
        self, memory: Tensor, memory_attention_mask: Tensor | None = None
    ) -> DecoderCache:
        """An empty decoder cache over ``memory`` ``(N, S, D)``; see :meth:`decode_step`."""
        return self.decoder.init_cache(memory, memory_attention_mask)

    def save_pretrained(self, path: str | Path, *, format: str = "ptm") -> Path:
        """Write ``config.json`` + ``model.safetensors`` atomically.

        Args:
            path: target directory.
            format: ``"ptm"``; ``"hf"`` (a ``T5ForConditionalGeneration`` directory for the
                T5 layout, else a ``BartForConditionalGeneration`` one); or explicitly
                ``"hf-bart"`` (post-LN, shared embeddings and tied head only) or ``"hf-t5"``
                (the T5 layout only).
        """
        return Path(registry.save(ENCODER_DECODER, self, path, format=format))

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> EncoderDecoderModel:
        """Load a ptm directory or a Hugging Face BART (``model_type: bart``) or T5
        (``model_type: t5``, ``T5Model`` / ``T5ForConditionalGeneration``) directory."""
        model: EncoderDecoderModel = registry.load(ENCODER_DECODER, path, **overrides)
        return model


def build_encoder_decoder(
    vocab_size: int,
    *,
    hidden_size: int = 768,
    encoder_layers: int = 6,
    decoder_layers: int = 6,
    num_heads: int = 12,
    intermediate_size: int | None = None,
    **kwargs: Any,
) -> EncoderDecoderModel:
    """Build an :class:`EncoderDecoderModel`; ``intermediate_size`` defaults to ``4 D``.

    Other keyword arguments are :class:`Seq2SeqConfig` fields.
    """
    return EncoderDecoderModel(
        Seq2SeqConfig(
            vocab_size=vocab_size,
            hidden_size=hidden_size,
            encoder_layers=encoder_layers,
            decoder_layers=decoder_layers,
            num_heads=num_heads,
            intermediate_size=intermediate_size or 4 * hidden_size,
            **kwargs,
        )
    )
