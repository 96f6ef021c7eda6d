"""Attention kernels as backends: one mask structure, the fastest kernel that can run it.

:func:`attend` runs ``softmax(QK^T * scale) V`` for an attention mask that is either a
plain tensor (today's path, unchanged) or an
:class:`~ptm_core.modules.attention_structure.AttentionStructure`, on one of
:data:`ATTENTION_BACKENDS`:

* ``"dense"`` - the reference: SDPA with the ``[B, 1, L, L]`` boolean mask that
  :func:`~ptm_core.modules.attention_masks.to_sdpa_mask` makes of ``structure.dense()``
  (exactly what passing the dense tensor does);
* ``"sdpa"`` - plain padding as a ``[B, 1, 1, L]`` key mask (or no mask), causal without
  padding as ``is_causal=True`` (SDPA's flash/efficient kernels), anything else with the
  dense boolean mask (built once per structure, shared by every layer);
* ``"flex"`` - :func:`torch.nn.attention.flex_attention.flex_attention` with the
  structure's block-sparse ``BlockMask``: compiled (``torch.compile``) on CUDA, eager
  elsewhere (eager flex materialises the scores; it is there for parity, not speed).
  Compiled, each structure signature has a dynamo frame of its own with automatic dynamic
  shapes, and a frame that reaches dynamo's recompile limit warns once and runs SDPA
  with the boolean mask from then on (:mod:`ptm_core.modules.compiled_frames`).
  Flex has no attention dropout, and torch 2.15 has no flex backward on CPU: with
  ``dropout > 0``, or on CPU when gradients are needed, ``"flex"`` falls back to
  ``"sdpa"`` (same outputs);
* ``"auto"`` - padding and causal through ``"sdpa"``; the other kinds through
  ``"flex"`` on CUDA and ``"sdpa"`` on CPU.

Measured on this repository's CPU (AMD Zen 5, 2 threads, torch 2.15, ``B=8, h=12,
d=64``, L=128/512, fp32/bf16; ``python -m benchmarks.attention_masks``, 20 alternated
pairs): SDPA with the dense ``[B, 1, L, L]`` mask of a causal, prefix, packed, K-BERT or
XLNet structure took a median 1.06x (0.99x-1.14x; padding timed against itself spread
0.86x-1.13x) the time of SDPA with a ``[B, 1, 1, L]`` padding mask, forward + backward.
Compiled flex took 1.7x-3.2x, forward only (no flex backward on CPU), eager flex 8x-10x.
Hence ``"auto"`` = SDPA on CPU.

Plain tensor masks always take the SDPA path they took before this module existed,
whatever the backend, so nothing that passes tensors changes behaviour.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.compiled_frames import compiled as compiled_frame
from ptm_core.modules.compiled_frames import compiled_or_none, gave_up
from ptm_core.modules.dropout import dropout as cheap_dropout

ATTENTION_BACKENDS: tuple[str, ...] = ("auto", "flex", "sdpa", "dense")


def check_backend(backend: str) -> str:
    """``backend`` when it is one of :data:`ATTENTION_BACKENDS`; else a ValueError."""
    if backend not in ATTENTION_BACKENDS:
        raise ValueError(
            f"unknown attention backend {backend!r}; valid backends: "
            f"{', '.join(ATTENTION_BACKENDS)} (attention.backend / "
            "ExecutionSettings(attention_backend=...))"
        )
    return backend


_HALF_DTYPES = (torch.bfloat16, torch.float16)


def _attend_with_dropout(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    dropout: float,
    scale: float | None,
    kernel: str = "auto",
) -> Tensor:
    """``dropout(softmax(QK^T * scale + mask)) V`` written out, in the inputs' dtype.

    On CPU, SDPA with ``dropout_p > 0`` has no fused kernel and falls back to its math
    path, which for bf16/fp16 inputs upcasts Q, K, V and the scores to fp32 and back
    (copies in forward and backward that cost more than bf16 saves). This is that math
    path without the upcasts: the two matmuls run in bf16 (fp32 accumulation inside the
    GEMM), the softmax kernel accumulates in fp32 internally. A bool mask becomes an
    additive one of the query's dtype (its most negative finite value where False).
    """
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query * factor, key.transpose(-1, -2))  # (B, h, Lq, Lk)
    if mask is not None:
        if mask.dtype == torch.bool:
            additive = torch.zeros(mask.shape, dtype=scores.dtype, device=mask.device)
            mask = additive.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        scores = scores + mask.to(scores.dtype)
    probs = cheap_dropout(scores.softmax(dim=-1), dropout, kernel=kernel)
    return torch.matmul(probs, value)


def _write_out(query: Tensor, kernel: str) -> bool:
    if query.dtype in _HALF_DTYPES:
        return True
    return kernel == "auto" and not torch.compiler.is_compiling()


def sdpa(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    dropout: float = 0.0,
    scale: float | None = None,
    *,
    is_causal: bool = False,
    dropout_kernel: str = "auto",
) -> Tensor:
    """:func:`torch.nn.functional.scaled_dot_product_attention`, ``(B, h, L, d)``, except
    with dropout on CPU, which runs :func:`_attend_with_dropout`: SDPA has no fused CPU
    kernel with dropout, and its math fallback would upcast bf16/fp16 to fp32 and back and
    draw the mask with ``bernoulli_`` (:mod:`ptm_core.modules.dropout` draws it cheaper;
    ``dropout_kernel`` is the calling module's kernel, see there).
    Every SDPA call in ptm goes through here."""
    if dropout > 0.0 and query.device.type == "cpu" and _write_out(query, dropout_kernel):
        if is_causal:
            length = query.shape[-2]
            mask = torch.ones(length, length, dtype=torch.bool, device=query.device).tril()
        return _attend_with_dropout(query, key, value, mask, dropout, scale, dropout_kernel)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout, is_causal=is_causal, scale=scale
    )


def _needs_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def resolve_backend(
    mask: Tensor | AttentionStructure | None,
    backend: str,
    query: Tensor,
    key: Tensor | None = None,
    value: Tensor | None = None,
    dropout: float = 0.0,
) -> str:
    """The backend :func:`attend` actually runs: ``"tensor"`` (a plain tensor or no mask:
    today's SDPA path), ``"dense"``, ``"sdpa"`` or ``"flex"``."""
    check_backend(backend)
    if not isinstance(mask, AttentionStructure):
        return "tensor"
    tensors = [t for t in (query, key, value) if t is not None]
    flex_possible = dropout == 0.0 and not (query.device.type == "cpu" and _needs_grad(*tensors))
    if backend == "auto":
        simple = mask.kind == "padding" or mask.is_plain_causal
        if simple or query.device.type != "cuda" or not flex_possible:
            return "sdpa"
        return "flex"
    if backend == "flex" and not flex_possible:
        return "sdpa"
    return backend


def _flex_attention(
    query: Tensor, key: Tensor, value: Tensor, block_mask: Any, scale: float | None = None
) -> Tensor:
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention(query, key, value, block_mask=block_mask, scale=scale)


def compiled_flex_attention(signature: str = "any") -> Any:
    """``torch.compile(flex_attention)`` (the fused kernel) in a dynamo frame of its own
    per structure signature (:attr:`AttentionStructure.signature`), called as
    ``(query, key, value, block_mask, scale)``; see :mod:`ptm_core.modules.compiled_frames`
    for why one frame per signature."""
    return compiled_frame(f"flex_attention_{signature}", _flex_attention)


def flex_attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    structure: AttentionStructure,
    scale: float | None = None,
    *,
    compiled: bool | None = None,
) -> Tensor:
    """``flex_attention`` over the structure's ``BlockMask``; ``(B, h, L, d)``.

    Compiled, each structure signature has its own dynamo frame with automatic dynamic
    shapes. Should a signature still reach dynamo's recompile limit, it warns once and
    runs SDPA with the structure's boolean mask from then on (same outputs), instead of
    dynamo's silent eager fallback (55x-140x slower on an H200).

    Args:
        compiled: run ``torch.compile(flex_attention)``; ``None`` = on CUDA only (eager
            flex materialises the scores; on CPU it is for parity, not speed).
    """
    use_compile = query.device.type == "cuda" if compiled is None else compiled
    structure = structure.to(query.device)
    if use_compile:
        name = f"flex_attention_{structure.signature}"
        if not gave_up(name):  # (checked first: a given-up signature needs no BlockMask)
            out = compiled_or_none(
                name,
                _flex_attention,
                "SDPA with the structure's boolean mask",
                query,
                key,
                value,
                structure.block_mask(),
                scale,
            )
            if out is not None:
                return cast(Tensor, out)
        return sdpa(query, key, value, structure.sdpa_mask(), 0.0, scale)
    import warnings

    with warnings.catch_warnings():  # "flex_attention called without torch.compile()"
        warnings.filterwarnings("ignore", message="flex_attention called without")
        return _flex_attention(query, key, value, structure.block_mask(), scale)


def attend(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | AttentionStructure | None,
    dropout: float = 0.0,
    scale: float | None = None,
    backend: str = "auto",
    *,
    compiled: bool | None = None,
    dropout_kernel: str = "auto",
) -> Tensor:
    """Attention on split heads, ``(B, h, L, d) -> (B, h, L, d)``, through ``backend``.

    Args:
        query, key, value: ``(B, h, L, d)``.
        mask: a plain tensor mask as :func:`torch.nn.functional.scaled_dot_product_attention`
            takes (bool True = may attend, or additive float), ``None``, or an
            :class:`AttentionStructure` (its ``L`` must be the sequence length).
        dropout: dropout probability on the attention weights (0 in eval mode). Flex has
            none: a positive value runs ``"sdpa"`` instead of ``"flex"``.
        scale: factor on ``QK^T``; ``None`` = ``1 / sqrt(d)``.
        backend: one of :data:`ATTENTION_BACKENDS` (see the module docstring).
        compiled: flex only: compile it (default: on CUDA).
        dropout_kernel: the calling module's dropout kernel (see :func:`sdpa`).

    Raises:
        ValueError: unknown backend (the message lists the valid ones), or a structure
            for another length.
    """
    chosen = resolve_backend(mask, backend, query, key, value, dropout)
    kernel = dropout_kernel
    if not isinstance(mask, AttentionStructure):
        return sdpa(query, key, value, mask, dropout, scale, dropout_kernel=kernel)
    mask.check_length(query.shape[-2])
    structure = mask.to(query.device)
    if chosen == "flex":
        return flex_attend(query, key, value, structure, scale, compiled=compiled)
    if chosen == "sdpa" and structure.is_plain_causal:
        return sdpa(query, key, value, None, dropout, scale, is_causal=True, dropout_kernel=kernel)
    sdpa_mask = structure.sdpa_mask() if chosen == "sdpa" else structure.reference_mask()
    return sdpa(query, key, value, sdpa_mask, dropout, scale, dropout_kernel=kernel)


def head_size(hidden_size: int, num_heads: int) -> int:
    """Width of one head, ``hidden_size / num_heads``; raises when it does not divide."""
    if hidden_size % num_heads:
        raise ValueError(
            f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}; "
            "choose num_heads that divides hidden_size"
        )
    return hidden_size // num_heads


def attend_heads(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None,
    dropout: float,
    scale: float | None = None,
    *,
    dropout_kernel: str = "auto",
) -> Tensor:
    """SDPA over split heads, with the heads merged back: ``(B, h, Lq, d) -> (B, Lq, h*d)``.

    The one place every ptm attention (self, cross, co-attention, relative, packed) calls
    :func:`torch.nn.functional.scaled_dot_product_attention`.

    Args:
        query: ``(B, h, Lq, d)``; key, value: ``(B, h, Lk, d)``.
        mask: bool (True = may attend) or additive float, broadcastable to
            ``(B, h, Lq, Lk)``; ``None`` = attend everywhere.
        dropout: dropout probability on the attention weights (pass 0 in eval mode).
        scale: factor on ``QK^T``; ``None`` = ``1 / sqrt(d)`` (T5 uses 1.0: the factor is
            folded into its initialisation).
        dropout_kernel: the calling module's dropout kernel (see :func:`sdpa`).
    """
    context = sdpa(query, key, value, mask, dropout, scale, dropout_kernel=dropout_kernel)
    batch, heads, length, head_dim = context.shape
    return context.transpose(1, 2).reshape(batch, length, heads * head_dim)
