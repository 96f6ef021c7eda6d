"""Unpadding switch of the encoder stack: run the layers on real tokens only.

With unpadding, :class:`~ptm_core.encoders.TransformerEncoder` drops the padding after the
embeddings, runs every layer on the ``T`` packed real tokens
(:class:`~ptm_core.modules.unpadding.UnpadLayout`) and re-pads at the end, as MosaicBERT
(Portes et al., 2023) and ModernBERT (Warner et al., 2024) do. Outputs at real positions
equal the padded path's (to float rounding); outputs at padding positions are **zeros**
(the padded path leaves meaningless values there; no ptm head or loss reads them).

Modes (:func:`set_unpadding`):

* ``"auto"`` (default): unpad when the batch's padding fraction is at least
  :data:`AUTO_MIN_PADDING` (below it, gathering and re-padding cost more than the skipped
  padding saves; see ``benchmarks/results/unpadding.md``), and never while tracing,
  exporting or compiling (the unpadded path has data-dependent shapes);
* ``"on"``: unpad whenever the stack can;
* ``"off"``: always the padded path.

The stack can unpad when the ``attention_mask`` is a ``[B, L]`` padding mask, the encoder
is the plain absolute-position one (not T5's bucketed bias, not XLNet), every layer's
attention is :class:`~ptm_core.modules.MultiHeadSelfAttention`, and no attention scores
are requested. Every other call silently takes the padded path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.unpadding import UnpadLayout

if TYPE_CHECKING:
    from ptm_core.encoders.transformer import TransformerEncoder, TransformerLayer

UNPADDING_MODES = ("auto", "on", "off")
# Padding fraction from which "auto" unpads. benchmarks/unpadding.py on the 2-core CPU
# (2026-11-24): at 30% padding 1.09-1.13x (mini) and 1.29-1.42x (base); with no padding to
# drop the gather and re-pad cost 0.91-1.02x, so small fractions are left padded.
AUTO_MIN_PADDING = 0.30


def check_unpadding_mode(mode: str) -> str:
    """Return ``mode`` if it is one of :data:`UNPADDING_MODES`, else raise ``ValueError``."""
    if mode not in UNPADDING_MODES:
        raise ValueError(
            f"unpadding mode must be one of {', '.join(UNPADDING_MODES)}; got {mode!r}"
        )
    return mode


def set_unpadding(model: nn.Module, mode: str) -> None:
    """Set the unpadding mode of every Transformer encoder stack inside ``model``.

    Args:
        model: an encoder, or any module holding encoders (a pre-training model, an
            extension model); modules without one are left as they are.
        mode: ``"auto"``, ``"on"`` or ``"off"`` (see :mod:`ptm_core.encoders.unpadding`).

    Raises:
        ValueError: ``mode`` is not one of :data:`UNPADDING_MODES`.
    """
    check_unpadding_mode(mode)
    for module in model.modules():
        if hasattr(module, "unpadding_mode"):
            module.unpadding_mode = mode  # type: ignore[assignment]


def _tracing() -> bool:
    # torch.export (the dynamo ONNX exporter) traces non-strictly: is_compiling() is False
    # there, is_exporting() is True. A traced graph must not bake in one batch's layout.
    return bool(
        torch.jit.is_tracing()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()
        or torch.onnx.is_in_onnx_export()
    )


def unpad_layout(
    encoder: TransformerEncoder,
    attention_mask: Tensor | AttentionStructure | None,
    seq_len: int,
    output_attention_scores: bool,
) -> UnpadLayout | None:
    """The layout to run ``encoder``'s stack on, or ``None`` for the padded path."""
    mode = encoder.unpadding_mode
    if mode == "off" or not isinstance(attention_mask, Tensor) or output_attention_scores:
        return None  # structures (AttentionStructure) keep the padded path
    if attention_mask.dim() != 2 or attention_mask.shape[1] != seq_len:
        return None  # visibility masks; a wrong length is reported by the padded path
    if encoder.relative_position_bias is not None:
        return None
    if not all(isinstance(layer.attention, MultiHeadSelfAttention) for layer in encoder.layers):
        return None
    if mode == "auto" and _tracing():
        return None
    real = attention_mask.bool()
    count = int(real.sum())
    if count == 0 or count == real.numel():
        return None
    if mode == "auto" and 1.0 - count / real.numel() < AUTO_MIN_PADDING:
        return None
    return UnpadLayout.from_mask(real)


def run_unpadded(
    encoder: TransformerEncoder, hidden: Tensor, layout: UnpadLayout, output_hidden_states: bool
) -> tuple[Tensor, tuple[Tensor, ...] | None]:
    """``encoder``'s layers (and final norm) on the packed real tokens of ``hidden``.

    Args:
        hidden: ``(B, L, D)`` embedding output.

    Returns:
        The last hidden state ``(B, L, D)`` and, when asked, the ``num_layers + 1`` hidden
        states ``(B, L, D)``; all zero at padding positions.
    """
    x = layout.unpad(hidden)  # (T, D)
    packed: list[Tensor] | None = [x] if output_hidden_states else None
    for layer in encoder.layers:
        x = cast("TransformerLayer", layer).forward_unpadded(x, layout)
        if packed is not None:
            packed.append(x)
    if encoder.final_norm is not None:
        x = encoder.final_norm(x)
    states = tuple(layout.repad(state) for state in packed) if packed is not None else None
    return layout.repad(x), states
