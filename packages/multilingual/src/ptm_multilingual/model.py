"""XLM = the core Transformer encoder + a language embedding table (Lample & Conneau, 2019)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import torch
from torch import Tensor, nn

from ptm_core.checkpoints import registry
from ptm_core.encoders import (
    EncoderOutput,
    TransformerEncoder,
    TransformerSize,
    builders,
)
from ptm_core.encoders.text_stack import WrapsTextEncoder
from ptm_core.peft.prompts import ROW_VALUE
from ptm_multilingual.kinds import XLM

PTM_XLM_FORMAT = "ptm-xlm-1"


def xlm_text_encoder(
    vocab_size: int = 8000,
    hidden_size: int = 1024,
    num_layers: int = 12,
    num_heads: int = 8,
    intermediate_size: int | None = None,
    max_positions: int = 512,
    dropout: float = 0.1,
    attention_dropout: float = 0.1,
    activation: str = "gelu",
    layer_norm_eps: float = 1e-12,
    pad_token_id: int = 2,
    initializer_range: float = 0.02,
) -> TransformerEncoder:
    """The text stack of XLM as a core encoder (Hydra ``_target_`` of ``model/xlm_*``).

    XLM is post-LN with GELU and learned positions, has no segment table (language
    embeddings take that role and are added by :class:`XLMEncoder`) and pads with id 2.
    Defaults are XLM's MLM-TLM en-fr size (1024 wide, 12 layers, 8 heads).
    """
    return builders.bert(TransformerSize.pick(locals()), type_vocab_size=0)


class XLMEncoder(WrapsTextEncoder):
    """XLM's encoder (Lample & Conneau, 2019): token + position + **language** embeddings.

    The language vector ``E_lang[langs]`` enters the core encoder through ``extra_embeds``
    (added before the embedding LayerNorm, as XLM does); TLM's restarting positions go in
    through ``position_ids``. Like XLM, padded positions of the output are zeroed (they
    never influence real positions, whose keys alone are attended).

    Args:
        encoder: a core encoder without segment embeddings (see :func:`xlm_text_encoder`).
        languages: language codes; ``langs`` id ``i`` means ``languages[i]``.

    Shapes:
        input_ids, attention_mask, position_ids, langs ``(B, L)``; output states ``(B, L, D)``.
    """

    text_encoder_attribute = "encoder"
    # xlm_finetune.peft=prompt (ptm_core.peft.prompts): prompt positions take the row's
    # language, as XLM gives its shared special tokens (</s>) the row's language.
    prompt_position_inputs: ClassVar[dict[str, int | str]] = {"langs": ROW_VALUE}

    def __init__(self, encoder: TransformerEncoder, languages: Sequence[str]) -> None:
        super().__init__()
        if not languages:
            raise ValueError("XLMEncoder needs at least one language code")
        self.encoder = encoder
        self.languages = list(languages)
        self.lang_embeddings = nn.Embedding(len(self.languages), encoder.config.hidden_size)
        nn.init.normal_(self.lang_embeddings.weight, std=encoder.config.initializer_range)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        langs: Tensor | None = None,
        *,
        inputs_embeds: Tensor | None = None,
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        """Encode a batch.

        Args:
            input_ids: ``(B, L)`` subword ids.
            attention_mask: ``(B, L)`` 1 = real token (or ``(B, L, L)`` visibility).
            position_ids: ``(B, L)``; TLM restarts them at 0 on the second sentence.
            langs: ``(B, L)`` language id of every token; ``None`` adds no language vector.
            inputs_embeds: ``(B, L, D)`` instead of ``input_ids``.
            output_hidden_states: also return every layer's states.
        """
        extra = None
        if langs is not None and len(self.languages) > 1:
            extra = self.lang_embeddings(langs)  # (B, L, D)
        out = self.encoder(
            input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            extra_embeds=extra,
            output_hidden_states=output_hidden_states,
        )
        if attention_mask is not None and attention_mask.dim() == 2:
            keep = attention_mask[..., None].to(out.last_hidden_state.dtype)  # (B, L, 1)
            out = EncoderOutput(
                last_hidden_state=out.last_hidden_state * keep,
                hidden_states=tuple(h * keep for h in out.hidden_states)
                if out.hidden_states is not None
                else None,
            )
        return out

    def checkpoint_config(self) -> dict[str, Any]:
        """What a training checkpoint's ``config.json`` records besides the text stack's
        config: the languages (``langs`` id ``i`` is ``languages[i]``)."""
        return {"languages": self.languages}

    def save_pretrained(
        self, path: str | Path, *, extra_writers: Sequence[Callable[[Path], object]] = ()
    ) -> Path:
        """Write ``config.json`` (encoder fields + languages) and ``model.safetensors``
        (:func:`ptm_multilingual.checkpoint.save_xlm`, the ``xlm`` family's ``save``)."""
        return cast(Path, registry.save(XLM, self, path, extra_writers=extra_writers))

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides: Any) -> XLMEncoder:
        """Load what :meth:`save_pretrained` wrote, or a Hugging Face XLM directory
        (:func:`ptm_multilingual.checkpoint.load_xlm`, the ``xlm`` family's ``load``).

        Args:
            path: checkpoint directory.
            **overrides: encoder config fields to change (``dropout=0.0``).
        """
        return cast(XLMEncoder, registry.load(XLM, path, **overrides))


class XLMPredictionHead(nn.Module):
    """XLM's output layer: one linear map to the vocabulary, tied to the token table.

    Unlike BERT's head there is no transform/LayerNorm before the projection.

    Args:
        hidden_size: ``D``.
        vocab_size: ``V``.
        tie_to: the token embedding ``(V, D)`` whose weight the projection shares.

    Shapes:
        ``(..., D) -> (..., V)``.
    """

    def __init__(
        self, hidden_size: int, vocab_size: int, *, tie_to: nn.Embedding | None = None
    ) -> None:
        super().__init__()
        self.proj = nn.Linear(hidden_size, vocab_size)
        nn.init.zeros_(self.proj.bias)
        if tie_to is not None:
            if tuple(tie_to.weight.shape) != (vocab_size, hidden_size):
                raise ValueError(
                    f"cannot tie the projection ({vocab_size}, {hidden_size}) to an embedding "
                    f"of shape {tuple(tie_to.weight.shape)}"
                )
            self.proj.weight = tie_to.weight

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.proj(hidden_states)


class XLMForMaskedLM(nn.Module):
    """:class:`XLMEncoder` + :class:`XLMPredictionHead` (``transformers.XLMWithLMHeadModel``).

    Args:
        encoder: the XLM encoder.
        head: its output layer; default a new one tied to the token table.
    """

    def __init__(self, encoder: XLMEncoder, head: XLMPredictionHead | None = None) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = head or XLMPredictionHead(
            encoder.hidden_size, encoder.vocab_size, tie_to=encoder.word_embeddings
        )

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        langs: Tensor | None = None,
    ) -> Tensor:
        """Returns ``(B, L, V)`` logits."""
        hidden = self.encoder(input_ids, attention_mask, position_ids, langs).last_hidden_state
        return self.head(hidden)


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Average of ``(B, L, D)`` states over real tokens -> ``(B, D)``."""
    mask = attention_mask[..., None].to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)


@torch.no_grad()
def encode_mean(
    encoder: XLMEncoder,
    input_ids: Tensor,
    attention_mask: Tensor,
    langs: Tensor | None = None,
) -> Tensor:
    """Mean-pooled last-layer states ``(B, D)`` in eval mode (no dropout)."""
    was_training = encoder.training
    encoder.eval()
    try:
        hidden = encoder(input_ids, attention_mask, langs=langs).last_hidden_state
    finally:
        encoder.train(was_training)
    return mean_pool(hidden, attention_mask)
