"""A model built around a core text encoder declares its text side through it."""

from __future__ import annotations

from typing import ClassVar, cast

from torch import nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import TransformerEncoder


class WrapsTextEncoder(nn.Module):
    """Base of models whose token states come from a core :class:`TransformerEncoder`
    (VisualBERT, ViLBERT, LXMERT, ERNIE-THU, XLM).

    ``text_encoder_attribute`` names the submodule holding that encoder; ``hidden_size``,
    ``vocab_size``, ``word_embeddings`` and ``text_config`` (what objectives read, see
    :class:`~ptm_core.objectives.inputs.TextBackbone`) are read from it.
    """

    text_encoder_attribute: ClassVar[str] = "encoder"

    @property
    def text_stack(self) -> TransformerEncoder:
        """The core text encoder."""
        return cast(TransformerEncoder, getattr(self, self.text_encoder_attribute))

    @property
    def text_config(self) -> EncoderConfig:
        """The text encoder's :class:`EncoderConfig` (the stack text objectives read)."""
        return self.text_stack.config

    @property
    def hidden_size(self) -> int:
        return self.text_stack.hidden_size

    @property
    def vocab_size(self) -> int:
        return self.text_stack.vocab_size

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.text_stack.word_embeddings
