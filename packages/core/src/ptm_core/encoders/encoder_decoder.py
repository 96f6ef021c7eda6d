"""Encoder-decoder Transformer (BART/MASS/T5 layout) with greedy and beam-search decoding."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.decoder import TransformerDecoder
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.modules.feed_forward import ACTIVATIONS
from ptm_core.modules.initialization import init_bert_weights


@dataclass
class Seq2SeqConfig:
    """Hyper-parameters of :class:`EncoderDecoderModel`, serialised as ``config.json``.

    Args:
        vocab_size: token ids (shared by encoder and decoder).
        hidden_size: width ``D``.
        encoder_layers: encoder layers.
        decoder_layers: decoder layers.
        num_heads: attention heads (encoder and decoder).
        intermediate_size: feed-forward inner width.
        max_positions: longest encoder input and decoder input.
        position_offset: first learned position row used (BART: 2).
        dropout: dropout on embeddings and sub-layer outputs.
        attention_dropout: dropout on attention probabilities.
        activation: feed-forward activation.
        layer_norm_eps: LayerNorm epsilon (BART: 1e-5).
        norm_position: ``"post"`` (BART) or ``"pre"``.
        pad_token_id: padding id.
        bos_token_id: begin-of-sequence id.
        eos_token_id: end id; generation stops there.
        decoder_start_token_id: first decoder input of generation.
        share_embeddings: one token table for encoder, decoder and LM head (BART).
        tie_lm_head: LM head weight = decoder token table.
        scale_embedding: multiply token vectors by ``sqrt(D)``.
        initializer_range: std of the normal initialisation.
    """

    vocab_size: int = 50265
    hidden_size: int = 768
    encoder_layers: int = 6
    decoder_layers: int = 6
    num_heads: int = 12
    intermediate_size: int = 3072
    max_positions: int = 1024
    position_offset: int = 2
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5
    norm_position: str = "post"
    pad_token_id: int = 1
    bos_token_id: int = 0
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    share_embeddings: bool = True
    tie_lm_head: bool = True
    scale_embedding: bool = False
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "encoder_layers", "decoder_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"Seq2SeqConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"Seq2SeqConfig.hidden_size={self.hidden_size} must be divisible by "
                f"num_heads={self.num_heads}"
            )
        if self.norm_position not in ("post", "pre"):
            raise ValueError(
                f"Seq2SeqConfig.norm_position must be 'post' or 'pre', got {self.norm_position!r}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"Seq2SeqConfig.activation {self.activation!r} is unknown; valid: "
                f"{', '.join(sorted(ACTIVATIONS))}"
            )

    def encoder_config(self) -> EncoderConfig:
        """The core encoder's config (no segment embeddings, offset position table)."""
        return EncoderConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            num_layers=self.encoder_layers,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            max_positions=self.max_positions + self.position_offset,
            type_vocab_size=0,
            dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            activation=self.activation,
            layer_norm_eps=self.layer_norm_eps,
            norm_position=self.norm_position,  # type: ignore[arg-type]
            pad_token_id=self.pad_token_id,
            initializer_range=self.initializer_range,
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "config") -> Seq2SeqConfig:
        """Build from a dict; unknown keys (other than ``ptm_*``) raise naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in data if k not in names and not k.startswith("ptm_"))
        if unknown:
            raise ValueError(
                f"{source}: unknown seq2seq config field(s) {unknown}; valid: {sorted(names)}"
            )
        return cls(**{k: v for k, v in data.items() if k in names})


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
    ``final_logits_bias`` is a buffer, as in ``BartForConditionalGeneration``.

    Args:
        config: :class:`Seq2SeqConfig`.

    Shapes:
        input_ids ``(B, S)``, decoder_input_ids ``(B, T)``, logits ``(B, T, V)``.
    """

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = TransformerEncoder(config.encoder_config())
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
        )
        if config.share_embeddings:
            self.decoder.embeddings.word = self.encoder.embeddings.word
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.register_buffer("final_logits_bias", torch.zeros(1, config.vocab_size))
        init_bert_weights(self, config.initializer_range)
        if config.tie_lm_head:
            self.lm_head.weight = self.decoder.embeddings.word.weight

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput:
        """Encoder states ``(B, S, D)`` for ``input_ids`` ``(B, S)``."""
        length = input_ids.shape[1]
        if length > self.config.max_positions:
            raise ValueError(
                f"encoder input of {length} tokens is longer than max_positions="
                f"{self.config.max_positions}; truncate it or raise max_positions"
            )
        positions = (
            torch.arange(length, device=input_ids.device)[None, :] + self.config.position_offset
        )
        embeds = self.encoder.embeddings.word(input_ids) * self.embed_scale
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
        return hidden, self.lm_head(hidden) + self.final_logits_bias

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
    ) -> list[list[int]]:
        """Greedy (``num_beams=1``) or beam-search decoding.

        Each step re-runs the decoder on the prefix (no key/value cache: simple and exact;
        fine for the short outputs of tests and demos).

        Args:
            input_ids: ``(B, S)`` source ids.
            attention_mask: ``(B, S)`` source padding.
            max_length: most generated tokens (start token not counted).
            num_beams: beam width.
            eos_token_id: stop token (default ``config.eos_token_id``); kept in the output.
            decoder_start_token_id: first decoder input (default from the config).
            length_penalty: beams are ranked by ``sum log p / length ** length_penalty``.

        Returns:
            For each row, the generated ids without the start token.
        """
        eos = self.config.eos_token_id if eos_token_id is None else eos_token_id
        start = (
            self.config.decoder_start_token_id
            if decoder_start_token_id is None
            else decoder_start_token_id
        )
        was_training = self.training
        self.eval()
        try:
            memory = self.encode(input_ids, attention_mask).last_hidden_state
            if num_beams <= 1:
                return self._greedy(memory, attention_mask, max_length, eos, start)
            return [
                self._beam(
                    memory[i : i + 1],
                    None if attention_mask is None else attention_mask[i : i + 1],
                    max_length,
                    eos,
                    start,
                    num_beams,
                    length_penalty,
                )
                for i in range(memory.shape[0])
            ]
        finally:
            self.train(was_training)

    def _greedy(
        self, memory: Tensor, mask: Tensor | None, max_length: int, eos: int, start: int
    ) -> list[list[int]]:
        batch = memory.shape[0]
        tokens = torch.full((batch, 1), start, dtype=torch.long, device=memory.device)
        done = torch.zeros(batch, dtype=torch.bool, device=memory.device)
        for _ in range(min(max_length, self.config.max_positions - 1)):
            _, logits = self.decode(tokens, memory, mask)
            step = logits[:, -1].argmax(dim=-1)  # (B,)
            step = torch.where(done, torch.full_like(step, self.config.pad_token_id), step)
            tokens = torch.cat([tokens, step[:, None]], dim=1)
            done = done | (step == eos)
            if bool(done.all()):
                break
        out = []
        for row, finished in zip(tokens[:, 1:].tolist(), done.tolist(), strict=True):
            out.append(row[: row.index(eos) + 1] if finished else row)
        return out

    def _beam(
        self,
        memory: Tensor,
        mask: Tensor | None,
        max_length: int,
        eos: int,
        start: int,
        num_beams: int,
        length_penalty: float,
    ) -> list[int]:
        # Alive beams: (ids incl. start, summed log-prob); finished: (ids, normalised score).
        alive: list[tuple[list[int], float]] = [([start], 0.0)]
        finished: list[tuple[list[int], float]] = []
        for _ in range(min(max_length, self.config.max_positions - 1)):
            tokens = torch.tensor([ids for ids, _ in alive], device=memory.device)
            count = tokens.shape[0]
            _, logits = self.decode(
                tokens,
                memory.expand(count, -1, -1),
                None if mask is None else mask.expand(count, -1),
            )
            logprobs = F.log_softmax(logits[:, -1].float(), dim=-1)  # (n, V)
            scores = logprobs + torch.tensor([s for _, s in alive], device=memory.device)[:, None]
            top = scores.flatten().topk(min(2 * num_beams, scores.numel()))
            candidates: list[tuple[list[int], float]] = []
            for value, index in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                beam, token = divmod(index, scores.shape[1])
                ids = [*alive[beam][0], token]
                if token == eos:
                    finished.append((ids, value / (len(ids) - 1) ** length_penalty))
                else:
                    candidates.append((ids, value))
                if len(candidates) == num_beams:
                    break
            alive = candidates
            best_done = max((s for _, s in finished), default=-math.inf)
            best_alive = max(
                (s / (len(i) - 1) ** length_penalty for i, s in alive), default=-math.inf
            )
            if not alive or (len(finished) >= num_beams and best_done >= best_alive):
                break
        pool = finished + [(i, s / (len(i) - 1) ** length_penalty) for i, s in alive]
        best = max(pool, key=lambda item: item[1])[0]
        return best[1:]

    def save_pretrained(self, path: str | Path, *, format: str = "ptm") -> Path:
        """Write ``config.json`` + ``model.safetensors`` atomically.

        Args:
            path: target directory.
            format: ``"ptm"`` or ``"hf"`` (a ``BartForConditionalGeneration`` directory;
                post-LN, shared embeddings and tied head only).
        """
        from ptm_core.checkpoints_hf.bart import save_seq2seq

        return save_seq2seq(self, path, format=format)

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> EncoderDecoderModel:
        """Load a ptm directory or a Hugging Face BART directory (``model_type: bart``)."""
        from ptm_core.checkpoints_hf.bart import load_seq2seq

        return load_seq2seq(path, **overrides)


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
