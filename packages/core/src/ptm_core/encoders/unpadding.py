"""Unpadding switch of the encoder stack: run the layers on real tokens only.

With unpadding, :class:`~ptm_core.encoders.TransformerEncoder` drops the padding after the
embeddings, runs every layer on the ``T`` packed real tokens
(:class:`~ptm_core.modules.unpadding.UnpadLayout`) and re-pads at the end, as MosaicBERT
(Portes et al., 2023) and ModernBERT (Warner et al., 2024) do. Outputs at real positions
equal the padded path's (to float rounding); outputs at padding positions are **zeros**
(the padded path leaves meaningless values there; no ptm head or loss reads them).

Modes (``ExecutionSettings(unpadding=...)``, given when the encoder is built or when a run
starts, see :mod:`ptm_core.modules.execution`):

* ``"auto"`` (default): unpad when the batch's padding fraction is at least
  :data:`AUTO_MIN_PADDING` (below it, gathering and re-padding cost more than the skipped
  padding saves; see ``benchmarks/results/unpadding.md``), and never while tracing,
  exporting or compiling (the unpadded path has data-dependent shapes);
* ``"on"``: unpad whenever the stack can;
* ``"off"``: always the padded path.

The stack can unpad when the ``attention_mask`` is one ``[B, L]`` padding mask (not a
per-layer list), the encoder is the plain absolute-position one (not T5's bucketed bias,
not XLNet), every layer's attention is :class:`~ptm_core.modules.MultiHeadSelfAttention`,
and no attention scores are requested. Every other call silently takes the padded path.
The stack itself (:meth:`~ptm_core.encoders.TransformerEncoder.run_layers`) runs the
layers on the layout; modules inserted between layers see the re-padded ``(B, L, D)``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.execution import UNPADDING_MODES, check_unpadding_mode
from ptm_core.modules.unpadding import UnpadLayout

__all__ = ["AUTO_MIN_PADDING", "UNPADDING_MODES", "check_unpadding_mode", "unpad_layout"]

# Padding fraction from which "auto" unpads. benchmarks/unpadding.py on the 2-core CPU
# (2026-11-24): at 30% padding 1.09-1.13x (mini) and 1.29-1.42x (base); with no padding to
# drop the gather and re-pad cost 0.91-1.02x, so small fractions are left padded.
AUTO_MIN_PADDING = 0.30


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
    mode: str,
    attention_mask: object,
    seq_len: int,
    *,
    stack_can_unpad: bool,
) -> UnpadLayout | None:
    """The layout to run a stack on, or ``None`` for the padded path.

    Args:
        mode: ``"auto"``, ``"on"`` or ``"off"``.
        attention_mask: what the caller gave the stack (only a ``[B, L]`` tensor unpads).
        seq_len: ``L``.
        stack_can_unpad: whether every layer of the stack can run on packed tokens and no
            per-layer bias or attention scores are needed (the stack decides).
    """
    if mode == "off" or not stack_can_unpad or not isinstance(attention_mask, Tensor):
        return None  # structures (AttentionStructure) and per-layer masks stay padded
    if isinstance(attention_mask, AttentionStructure):
        return None
    if attention_mask.dim() != 2 or attention_mask.shape[1] != seq_len:
        return None  # visibility masks; a wrong length is reported by the padded path
    if mode == "auto" and _tracing():
        return None
    real = attention_mask.bool()
    count = int(real.sum())
    if count == 0 or count == real.numel():
        return None
    if mode == "auto" and 1.0 - count / real.numel() < AUTO_MIN_PADDING:
        return None
    return UnpadLayout.from_mask(real)
