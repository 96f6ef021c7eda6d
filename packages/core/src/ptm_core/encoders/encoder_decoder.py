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
from ptm_core.encoders.decoder import DECODER_POSITIONS, DecoderCache, TransformerDecoder
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.modules.feed_forward import ACTIVATIONS
from ptm_core.modules.initialization import init_bert_weights, init_t5_weights
from ptm_core.modules.norms import NORM_TYPES

INITIALIZATIONS = ("bert", "t5")


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
        position_encoding: ``"learned"`` (absolute tables, BART) or ``"t5_buckets"`` (T5,
            Raffel et al., 2020: no tables; a learned scalar per head and log-spaced
            distance bucket, bidirectional in the encoder and causal in the decoder's
            self-attention, computed once per stack and added to every layer's logits).
        relative_attention_num_buckets: ``"t5_buckets"``: distance buckets (T5: 32).
        relative_attention_max_distance: ``"t5_buckets"``: distance that reaches the last
            bucket (T5: 128).
        norm_type: ``"layernorm"`` (BART) or ``"rmsnorm"`` (T5: scale only, eps 1e-6).
        bias: biases on the attention and feed-forward linears (T5: no).
        attention_scale: divide ``QK^T`` by ``sqrt(d)`` (T5: no; its initialisation absorbs it).
        gated_feed_forward: ``W_out(act(W_gate x) * W_in x)`` (T5 v1.1 gated-GELU).
        embedding_layer_norm: LayerNorm on the embeddings (BART yes, T5 no).
        scale_decoder_output: multiply the decoder output by ``D ** -0.5`` before the LM
            head (T5 v1.0 with its head tied to the token table).
        initialization: ``"bert"`` (every weight ``N(0, initializer_range)``) or ``"t5"``
            (:func:`~ptm_core.modules.t5.init_t5_weights`: unit-variance token table,
            ``D^-1/2``-scaled projections, queries also ``d^-1/2``; what unscaled attention
            and a scaled tied head are designed for).

    T5 v1.0 is ``position_encoding="t5_buckets"``, ``norm_type="rmsnorm"``,
    ``layer_norm_eps=1e-6``, ``norm_position="pre"``, ``bias=False``,
    ``attention_scale=False``, ``activation="relu"``, ``embedding_layer_norm=False``,
    ``scale_decoder_output=True``, ``initialization="t5"``, ``position_offset=0`` and the
    pad id as decoder start
    (see ``configs/model/t5_tiny.yaml`` and :mod:`ptm_core.checkpoints_hf.t5`).
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
    position_encoding: str = "learned"
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    norm_type: str = "layernorm"
    bias: bool = True
    attention_scale: bool = True
    gated_feed_forward: bool = False
    embedding_layer_norm: bool = True
    scale_decoder_output: bool = False
    initialization: str = "bert"

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
        if self.position_encoding not in DECODER_POSITIONS:
            raise ValueError(
                f"Seq2SeqConfig.position_encoding must be one of {', '.join(DECODER_POSITIONS)}, "
                f"got {self.position_encoding!r}"
            )
        if self.norm_type not in NORM_TYPES:
            raise ValueError(
                f"Seq2SeqConfig.norm_type must be one of {', '.join(NORM_TYPES)}, "
                f"got {self.norm_type!r}"
            )
        for name in ("relative_attention_num_buckets", "relative_attention_max_distance"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 2:
                raise ValueError(f"Seq2SeqConfig.{name} must be an integer >= 2, got {value!r}")
        if self.initialization not in INITIALIZATIONS:
            raise ValueError(
                f"Seq2SeqConfig.initialization must be one of {', '.join(INITIALIZATIONS)}, "
                f"got {self.initialization!r}"
            )

    @property
    def bucketed(self) -> bool:
        """Whether positions are T5's bucketed relative bias (no position tables)."""
        return self.position_encoding == "t5_buckets"

    def encoder_config(self) -> EncoderConfig:
        """The core encoder's config (no segment embeddings, offset position table or T5's
        bucketed bias)."""
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
            position_encoding="bucketed" if self.bucketed else "absolute",
            embedding_layer_norm=self.embedding_layer_norm,
            relative_attention_num_buckets=self.relative_attention_num_buckets,
            relative_attention_max_distance=self.relative_attention_max_distance,
            norm_type=self.norm_type,  # type: ignore[arg-type]
            bias=self.bias,
            attention_scale=self.attention_scale,
            gated_feed_forward=self.gated_feed_forward,
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
        length = input_ids.shape[1]
        if length > self.config.max_positions:
            raise ValueError(
                f"encoder input of {length} tokens is longer than max_positions="
                f"{self.config.max_positions}; truncate it or raise max_positions"
            )
        positions = (
            torch.arange(length, device=input_ids.device)[None, :] + self.config.position_offset
            if not self.config.bucketed
            else None
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
                return self._greedy(memory, attention_mask, max_length, eos, start, use_cache)
            return self._beam(
                memory,
                attention_mask,
                max_length,
                eos,
                start,
                num_beams,
                length_penalty,
                use_cache,
            )
        finally:
            self.train(was_training)

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

    def _next_logits(
        self,
        tokens: Tensor,
        memory: Tensor,
        mask: Tensor | None,
        cache: DecoderCache | None,
        sources: Tensor | None = None,
    ) -> tuple[Tensor, DecoderCache | None]:
        # Next-token logits (N, V) after the prefixes `tokens` (N, t) whose sources are rows
        # `sources` (N,) of memory (B, S, D) (None: row i is source i): from the cache, which
        # holds the first cache.length tokens of every row, or by re-running the decoder.
        if cache is None:
            if sources is not None:
                memory = memory.index_select(0, sources)
                mask = None if mask is None else mask.index_select(0, sources)
            _, logits = self.decode(tokens, memory, mask)
            return logits[:, -1], None
        logits, cache = self.decode_step(tokens[:, cache.length :], cache)
        return logits[:, -1], cache

    def _greedy(
        self,
        memory: Tensor,
        mask: Tensor | None,
        max_length: int,
        eos: int,
        start: int,
        use_cache: bool,
    ) -> list[list[int]]:
        batch = memory.shape[0]
        tokens = torch.full((batch, 1), start, dtype=torch.long, device=memory.device)
        done = torch.zeros(batch, dtype=torch.bool, device=memory.device)
        cache = self.init_decoder_cache(memory, mask) if use_cache else None
        for _ in range(min(max_length, self.config.max_positions - 1)):
            logits, cache = self._next_logits(tokens, memory, mask, cache)
            step = logits.argmax(dim=-1)  # (B,)
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
        use_cache: bool,
    ) -> list[list[int]]:
        # Every source keeps its alive beams (ids incl. start, summed log-prob) and its
        # finished ones (ids, normalised score); a source stops once no alive beam can beat
        # its finished ones. One decoder call per step serves the alive beams of all active
        # sources: row r of `tokens` / the cache is one beam of source `sources[r]`, rows in
        # the order of `active` then `alive[i]`.
        batch, device = memory.shape[0], memory.device
        alive: list[list[tuple[list[int], float]]] = [[([start], 0.0)] for _ in range(batch)]
        finished: list[list[tuple[list[int], float]]] = [[] for _ in range(batch)]
        active = list(range(batch))
        sources = torch.arange(batch, device=device)  # (N,)
        cache = self.init_decoder_cache(memory, mask) if use_cache else None
        for _ in range(min(max_length, self.config.max_positions - 1)):
            tokens = torch.tensor(
                [ids for i in active for ids, _ in alive[i]], device=device
            )  # (N, t)
            logits, cache = self._next_logits(tokens, memory, mask, cache, sources)
            logprobs = F.log_softmax(logits.float(), dim=-1)  # (N, V)
            still_active: list[int] = []
            parents: list[int] = []  # row of each surviving beam's parent
            first = 0
            for i in active:
                count = len(alive[i])
                summed = torch.tensor([s for _, s in alive[i]], device=device)
                scores = logprobs[first : first + count] + summed[:, None]  # (n, V)
                top = scores.flatten().topk(min(2 * num_beams, scores.numel()))
                candidates: list[tuple[list[int], float]] = []
                rows: list[int] = []
                for value, index in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                    beam, token = divmod(index, scores.shape[1])
                    ids = [*alive[i][beam][0], token]
                    if token == eos:
                        finished[i].append((ids, value / (len(ids) - 1) ** length_penalty))
                    else:
                        candidates.append((ids, value))
                        rows.append(first + beam)
                    if len(candidates) == num_beams:
                        break
                first += count
                alive[i] = candidates
                best_done = max((s for _, s in finished[i]), default=-math.inf)
                best_alive = max(
                    (s / (len(ids) - 1) ** length_penalty for ids, s in candidates),
                    default=-math.inf,
                )
                if candidates and (len(finished[i]) < num_beams or best_done < best_alive):
                    still_active.append(i)
                    parents.extend(rows)
            active = still_active
            if not active:
                break
            index = torch.tensor(parents, device=device)
            sources = sources.index_select(0, index)
            if cache is not None:
                cache = cache.reorder(index)
        out = []
        for i in range(batch):
            pool = finished[i] + [
                (ids, s / (len(ids) - 1) ** length_penalty) for ids, s in alive[i]
            ]
            out.append(max(pool, key=lambda item: item[1])[0][1:])
        return out

    def save_pretrained(self, path: str | Path, *, format: str = "ptm") -> Path:
        """Write ``config.json`` + ``model.safetensors`` atomically.

        Args:
            path: target directory.
            format: ``"ptm"``; ``"hf"`` (a ``T5ForConditionalGeneration`` directory for the
                T5 layout, else a ``BartForConditionalGeneration`` one); or explicitly
                ``"hf-bart"`` (post-LN, shared embeddings and tied head only) or ``"hf-t5"``
                (the T5 layout only).
        """
        from ptm_core.checkpoints_hf import bart, t5

        formats = ("ptm", "hf", "hf-bart", "hf-t5")
        if format not in formats:
            raise ValueError(f"format must be one of {', '.join(formats)}, got {format!r}")
        if format == "hf-t5" or (format == "hf" and self.config.bucketed):
            return t5.save_t5(self, path)
        config = self.config
        if format != "ptm" and (
            config.bucketed
            or config.norm_type != "layernorm"
            or not (config.bias and config.attention_scale and config.embedding_layer_norm)
            or config.gated_feed_forward
            or config.scale_decoder_output
        ):
            from ptm_core.checkpoints import CheckpointError

            raise CheckpointError(
                "BART export needs learned positions, LayerNorms, biases, scaled attention, "
                "an embedding LayerNorm, a plain feed-forward and an unscaled LM head; "
                "save with format='ptm'"
            )
        return bart.save_seq2seq(self, path, format="hf" if format == "hf-bart" else format)

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> EncoderDecoderModel:
        """Load a ptm directory or a Hugging Face BART (``model_type: bart``) or T5
        (``model_type: t5``, ``T5Model`` / ``T5ForConditionalGeneration``) directory."""
        from ptm_core.checkpoints_hf import bart, t5

        if t5.is_hf_t5_directory(path):
            return t5.load_t5(path, **overrides)
        return bart.load_seq2seq(path, **overrides)


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
