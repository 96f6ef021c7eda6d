"""The encoder for a config: the one place that maps numbers to an encoder class."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.encoders.xlnet import XLNetConfig, XLNetEncoder
from ptm_core.modules.execution import ExecutionSettings


@runtime_checkable
class BuildsItsEncoder(Protocol):
    """A family config that wires its own blocks into the stack (e.g.
    :class:`~ptm_core.compress.pruned.PrunedEncoderConfig`'s narrower attention)."""

    def build_encoder(self, settings: ExecutionSettings | None = None) -> TransformerEncoder: ...


def encoder_class(config: EncoderConfig) -> type[TransformerEncoder]:
    """:class:`XLNetEncoder` for Transformer-XL relative positions, else
    :class:`TransformerEncoder` (absolute positions, or T5's bucketed bias)."""
    return XLNetEncoder if isinstance(config, XLNetConfig) else TransformerEncoder


def encoder_from_config(
    config: EncoderConfig, *, settings: ExecutionSettings | None = None
) -> TransformerEncoder:
    """Build (randomly initialised) the encoder a config describes, running with
    ``settings`` (default :class:`ExecutionSettings`).

    Loaders and recipes call this instead of ``TransformerEncoder(config)``, so a
    ``config.json`` of any family comes back as its own class with its own blocks.
    """
    if isinstance(config, BuildsItsEncoder):
        return config.build_encoder(settings)
    if isinstance(config, XLNetConfig):
        return XLNetEncoder(config, settings=settings)
    return TransformerEncoder(config, settings=settings)
