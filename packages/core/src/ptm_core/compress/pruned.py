"""The description of a head-pruned encoder (``ptm compress --method prune-heads``).

:class:`PrunedEncoderConfig` is an :class:`~ptm_core.encoders.EncoderConfig` whose layers
kept different numbers of attention heads. It is the pruned model's ``config.json`` (the
shared shape plus ``heads_per_layer``); :meth:`EncoderConfig.from_dict
<ptm_core.encoders.config.EncoderConfig.from_dict>` gives this class for a dict with
``heads_per_layer`` once this module is imported (the encoder checkpoint loader imports it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.layers import standard_attention
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.modules.execution import ExecutionSettings


@dataclass
class PrunedEncoderConfig(EncoderConfig):
    """An encoder after attention-head pruning (Michel et al., 2019).

    Args:
        heads_per_layer: the number of heads each layer kept (``num_layers`` integers, each
            ``1..num_heads``); every head keeps the unpruned width ``hidden_size /
            num_heads``. Absolute positions without layer sharing only.
    """

    heads_per_layer: list[int] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        super().__post_init__()
        heads = self.heads_per_layer
        if (
            not isinstance(heads, list | tuple)
            or len(heads) != self.num_layers
            or not all(isinstance(h, int) and 1 <= h <= self.num_heads for h in heads)
        ):
            raise ValueError(
                f"PrunedEncoderConfig.heads_per_layer must be a list of num_layers="
                f"{self.num_layers} integers in 1..num_heads={self.num_heads}, got {heads!r}; "
                "an unpruned encoder has no heads_per_layer"
            )
        if self.position_encoding != "absolute" or self.share_layers != "none":
            raise ValueError(
                "PrunedEncoderConfig.heads_per_layer (pruned heads) needs position_encoding="
                f"'absolute' and share_layers='none', got {self.position_encoding!r} and "
                f"{self.share_layers!r}"
            )
        self.heads_per_layer = list(heads)

    @classmethod
    def claims(cls, data: dict[str, Any]) -> bool:
        """A dict with a non-null ``heads_per_layer`` describes a pruned encoder."""
        return data.get("heads_per_layer") is not None

    def build_encoder(self, settings: ExecutionSettings | None = None) -> TransformerEncoder:
        """The (randomly initialised) encoder: layer ``i``'s attention has
        ``heads_per_layer[i]`` heads of width ``hidden_size / num_heads``."""
        head_dim = self.hidden_size // self.num_heads
        return TransformerEncoder(
            self,
            attention=lambda index: standard_attention(
                self, index, settings, heads=self.heads_per_layer[index], head_dim=head_dim
            ),
            settings=settings,
        )


def encoder_config_from_dict(data: dict[str, Any], *, source: str = "config") -> EncoderConfig:
    """:meth:`EncoderConfig.from_dict` for any saved encoder, a pruned one included.

    Loaders of ``config.json`` files that ``ptm compress`` may have written call this: it
    is defined here so that calling it guarantees :class:`PrunedEncoderConfig` exists to
    claim a dict with ``heads_per_layer``.
    """
    return EncoderConfig.from_dict(data, source=source)
