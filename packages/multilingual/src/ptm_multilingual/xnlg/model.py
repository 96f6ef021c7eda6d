"""XNLG's network: XLM's encoder + a Transformer decoder with language embeddings.

Chi et al. (2020), "Cross-Lingual Natural Language Generation via Pre-Training". The
encoder is the stage-1 :class:`~ptm_multilingual.model.XLMEncoder` (MLM + TLM); the decoder
is the core :class:`~ptm_core.encoders.decoder.TransformerDecoder` whose embeddings get a
**target-language** vector (``extra_embeds``), so one decoder writes any language of the
shared vocabulary: the language id given at generation time picks it. As in the reference
(``--reload_model stage1.pth,stage1.pth``), the decoder starts from the stage-1 encoder: its
token, position and language tables, embedding LayerNorm and, layer by layer, the
self-attention and feed-forward weights; only the cross-attention is new. The output layer
is XLM's projection tied to the decoder's token table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from ptm_core.checkpoints import registry
from ptm_core.encoders import generation
from ptm_core.encoders.decoder import DecoderCache, TransformerDecoder
from ptm_core.encoders.encoder_decoder import Seq2SeqOutput
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.encoders.transformer import EncoderOutput
from ptm_multilingual.kinds import XNLG
from ptm_multilingual.model import XLMEncoder, XLMPredictionHead

PTM_XNLG_FORMAT = "ptm-xnlg-1"


@dataclass(frozen=True)
class XNLGDecoderConfig:
    """The decoder's numbers and special ids (``config.json``'s ``decoder`` block).

    Attributes:
        num_layers: decoder layers (the reference: 6 under a 10-layer encoder).
        start_id: the first decoder input (ptm's ``[CLS]``; XLM's ``</s>``).
        end_id: the token that ends a generated sentence (``[SEP]``).
        pad_id: padding.
    """

    num_layers: int
    start_id: int
    end_id: int
    pad_id: int


@dataclass(frozen=True)
class XNLGDecoding:
    """What :mod:`ptm_core.encoders.generation` reads of a model's ``config``."""

    pad_token_id: int
    eos_token_id: int
    decoder_start_token_id: int
    max_positions: int


def xnlg_decoder(encoder: XLMEncoder, num_layers: int, pad_id: int) -> TransformerDecoder:
    """A post-LN decoder of the encoder's width, heads, positions and activation."""
    config = encoder.encoder.config
    return TransformerDecoder(
        config.vocab_size,
        config.hidden_size,
        num_layers,
        config.num_heads,
        config.intermediate_size,
        config.max_positions,
        position_offset=0,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation=config.activation,
        layer_norm_eps=config.layer_norm_eps,
        norm_position="post",
        pad_token_id=pad_id,
    )


#: Encoder layer parameter prefix -> decoder layer parameter prefix (stage-1 -> decoder).
_LAYER_NAMES = {
    "attention.": "self_attention.",
    "attention_norm.": "self_attention_norm.",
    "feed_forward.": "feed_forward.",
    "ffn_norm.": "ffn_norm.",
}


class XNLGModel(nn.Module):
    """XNLG: an XLM encoder and a language-conditioned decoder (Chi et al., 2020).

    Args:
        encoder: the stage-1 XLM encoder.
        decoder: a core decoder of the encoder's width (:func:`xnlg_decoder`).
        config: the decoder's numbers and special ids.

    Shapes:
        input_ids, attention_mask, langs ``(B, S)``; decoder_input_ids,
        decoder_attention_mask ``(B, T)``; decoder_langs ``(B,)``; logits ``(B, T, V)``.
    """

    def __init__(
        self, encoder: XLMEncoder, decoder: TransformerDecoder, config: XNLGDecoderConfig
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.decoder_config = config
        hidden = encoder.hidden_size
        self.lang_embeddings = nn.Embedding(len(encoder.languages), hidden)
        nn.init.normal_(self.lang_embeddings.weight, std=encoder.encoder.config.initializer_range)
        self.head = XLMPredictionHead(hidden, encoder.vocab_size, tie_to=decoder.embeddings.word)
        self.config = XNLGDecoding(
            pad_token_id=config.pad_id,
            eos_token_id=config.end_id,
            decoder_start_token_id=config.start_id,
            max_positions=decoder.max_positions,
        )

    @classmethod
    def from_encoder(
        cls,
        encoder: XLMEncoder,
        *,
        num_layers: int,
        start_id: int,
        end_id: int,
        pad_id: int,
        init_decoder: bool = True,
    ) -> XNLGModel:
        """Build XNLG around a stage-1 encoder; with ``init_decoder`` the decoder starts
        from it (see the module docstring; the reference's ``--reload_model a,a``)."""
        config = XNLGDecoderConfig(num_layers, start_id, end_id, pad_id)
        model = cls(encoder, xnlg_decoder(encoder, num_layers, pad_id), config)
        if init_decoder:
            model.init_decoder_from_encoder()
        return model

    @property
    def languages(self) -> list[str]:
        return self.encoder.languages

    @property
    def text_config(self) -> Any:
        """The encoder's text-stack config (what a training checkpoint records)."""
        return self.encoder.encoder.config

    def lang_id(self, lang: str) -> int:
        """The language-embedding id of ``lang``.

        Raises:
            ValueError: the model does not know ``lang`` (the message lists its languages).
        """
        if lang not in self.languages:
            raise ValueError(f"language {lang!r} is not one of this model's {self.languages}")
        return self.languages.index(lang)

    @torch.no_grad()
    def init_decoder_from_encoder(self) -> None:
        """Copy the encoder's tables, embedding norm and the first decoder-many layers'
        self-attention and feed-forward weights into the decoder.

        Raises:
            ValueError: the decoder has more layers than the encoder.
        """
        source = self.encoder.encoder
        if len(self.decoder.layers) > len(source.layers):
            raise ValueError(
                f"a {len(self.decoder.layers)}-layer decoder cannot start from a "
                f"{len(source.layers)}-layer encoder; set xnlg.decoder_layers <= "
                f"{len(source.layers)} or xnlg.init_decoder=false"
            )
        target = self.decoder.state_dict()
        for name, value in source.embeddings.state_dict().items():
            if f"embeddings.{name}" in target:
                target[f"embeddings.{name}"].copy_(value)
        for index in range(len(self.decoder.layers)):
            for name, value in source.layers[index].state_dict().items():
                for old, new in _LAYER_NAMES.items():
                    if name.startswith(old):
                        target[f"layers.{index}.{new}{name[len(old) :]}"].copy_(value)
        self.lang_embeddings.weight.copy_(self.encoder.lang_embeddings.weight)

    def freeze_encoder(self, frozen: bool = True) -> None:
        """Stage 2 trains the decoder only (``--train_model_names decoder``)."""
        for parameter in self.encoder.parameters():
            parameter.requires_grad_(not frozen)

    def encode(
        self, input_ids: Tensor, attention_mask: Tensor | None, langs: Tensor | None
    ) -> EncoderOutput:
        """Encoder states ``(B, S, D)``."""
        return self.encoder(input_ids, attention_mask, langs=langs)

    def target_vectors(self, decoder_langs: Tensor) -> Tensor:
        """``(B,)`` target-language ids -> ``(B, 1, D)`` vectors added to every decoder
        position."""
        return self.lang_embeddings(decoder_langs)[:, None, :]

    def forward(
        self,
        input_ids: Tensor,
        decoder_input_ids: Tensor,
        decoder_langs: Tensor,
        attention_mask: Tensor | None = None,
        langs: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> Seq2SeqOutput:
        """Teacher-forced pass: source in its language, target in ``decoder_langs``."""
        memory = self.encode(input_ids, attention_mask, langs).last_hidden_state
        hidden = self.decoder(
            decoder_input_ids,
            memory,
            decoder_attention_mask,
            attention_mask,
            extra_embeds=self.target_vectors(decoder_langs),
        )
        return Seq2SeqOutput(self.head(hidden), hidden, memory)

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None,
        langs: Tensor | None,
        target_lang: str,
        *,
        max_length: int = 32,
        num_beams: int = 1,
        length_penalty: float = 1.0,
    ) -> list[list[int]]:
        """Generate in ``target_lang`` (greedy or beam search, with a key/value cache).

        Args:
            input_ids: ``(B, S)`` sources.
            attention_mask: ``(B, S)`` source padding.
            langs: ``(B, S)`` source language ids.
            target_lang: the language to write (any of :attr:`languages`; zero-shot when
                the model was fine-tuned on another).
            max_length: most generated tokens.
            num_beams: beam width.
            length_penalty: beam ranking ``sum log p / length ** length_penalty``.

        Returns:
            For each row, the generated ids without the start token.
        """
        directed = _Directed(self, langs, self.lang_id(target_lang))
        return generation.generate(
            cast(generation.Seq2SeqDecoding, directed),
            input_ids,
            attention_mask,
            max_length=max_length,
            num_beams=num_beams,
            length_penalty=length_penalty,
        )

    def checkpoint_config(self) -> dict[str, Any]:
        """``config.json``'s fields besides the kind: languages, encoder and decoder."""
        return {
            "ptm_format": PTM_XNLG_FORMAT,
            "languages": self.languages,
            "encoder": self.encoder.encoder.config.to_dict(),
            "decoder": asdict(self.decoder_config),
        }

    def save_pretrained(
        self, path: str | Path, *, extra_writers: Sequence[Callable[[Path], object]] = ()
    ) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (and what ``extra_writers`` write
        into the folder: the tokenizer) in one atomic step
        (:func:`ptm_multilingual.xnlg.checkpoint.save_xnlg`)."""
        return cast(Path, registry.save(XNLG, self, path, extra_writers=extra_writers))

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> XNLGModel:
        """Load what :meth:`save_pretrained` wrote
        (:func:`ptm_multilingual.xnlg.checkpoint.load_xnlg`)."""
        return cast(XNLGModel, registry.load(XNLG, path, **overrides))


class _Directed:
    """One generation call's view of :class:`XNLGModel` for
    :mod:`ptm_core.encoders.generation`: source languages and the target language fixed."""

    def __init__(self, model: XNLGModel, langs: Tensor | None, target: int) -> None:
        self.model = model
        self.langs = langs
        self.config = cast(Seq2SeqConfig, model.config)
        device = model.lang_embeddings.weight.device
        self.vector = model.target_vectors(torch.tensor([target], device=device))  # (1, 1, D)

    @property
    def training(self) -> bool:
        return self.model.training

    def train(self, mode: bool = True) -> object:
        return self.model.train(mode)

    def eval(self) -> object:
        return self.model.eval()

    def encode(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> EncoderOutput:
        return self.model.encode(input_ids, attention_mask, self.langs)

    def decode(
        self,
        decoder_input_ids: Tensor,
        memory: Tensor,
        memory_attention_mask: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        hidden = self.model.decoder(
            decoder_input_ids,
            memory,
            decoder_attention_mask,
            memory_attention_mask,
            extra_embeds=self.vector,
        )
        return hidden, self.model.head(hidden)

    def decode_step(
        self, decoder_input_ids: Tensor, cache: DecoderCache
    ) -> tuple[Tensor, DecoderCache]:
        hidden, cache = self.model.decoder.step(decoder_input_ids, cache, extra_embeds=self.vector)
        return self.model.head(hidden), cache

    def init_decoder_cache(
        self, memory: Tensor, memory_attention_mask: Tensor | None = None
    ) -> DecoderCache:
        return self.model.decoder.init_cache(memory, memory_attention_mask)


__all__ = [
    "PTM_XNLG_FORMAT",
    "XNLGDecoderConfig",
    "XNLGDecoding",
    "XNLGModel",
    "xnlg_decoder",
]
