"""Dropout whose random mask is cheap on CPU.

On CPU, :func:`torch.nn.functional.dropout` draws its mask with ``bernoulli_``: one
Mersenne-Twister draw and a float compare per element, serially. In a bf16 BERT-base
training step that is 8-16% of the step, depending on the CPU (``python -m
benchmarks.profile_step --size base --precision bf16``), more than LayerNorm, GELU and the
softmax together, because the GEMMs got faster and the random numbers did not.

:func:`dropout` draws 64 random bits per four elements instead (``random_`` over the full
int64 range, viewed as four int16 lanes) and keeps an element when its 16-bit lane is at or
above ``round(p * 65536)``. The drop probability is ``p`` rounded to a multiple of 1/65536
(0.1 becomes 0.100006); kept elements are scaled by the inverse of the exact keep
probability, so the output's expectation is the input, as with torch's dropout. The mask is
built with arithmetic only (a clamp of the lanes to the threshold's two neighbours, a
subtraction, a cast to uint8): on CPU, kernels that make or read bool tensors are several
times slower than arithmetic ones, and ``bernoulli_`` plus ``native_dropout_backward``
(which casts the bool mask to the input's dtype in forward and again in backward) cost
about four times as much. The uint8 mask (one byte per element, as torch saves its bool
mask) is saved for backward, and both directions are one ``addcmul`` in the input's dtype.
The random numbers come from the default CPU generator, so ``torch.manual_seed`` makes runs
repeat.

It is used where it pays: CPU tensors, outside ``torch.compile`` (Inductor generates its own
random numbers) and outside TorchScript. CUDA keeps torch's fused Philox kernel.

The kernel is a setting of each module, given when it is built (``Dropout(p, kernel=...)``,
or a stack's :class:`~ptm_core.modules.execution.ExecutionSettings`): ``"auto"`` (the cheap
mask where it applies) or ``"torch"`` (always :func:`torch.nn.functional.dropout`, e.g. to
reproduce a run made before the cheap mask existed). A module built without one takes
:func:`default_dropout_kernel`: ``PTM_DROPOUT_KERNEL`` when set, else ``"auto"``, read when
the module is built.
"""

from __future__ import annotations

import math
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

DROPOUT_KERNELS = ("auto", "torch")
# Below this many elements the two-kernel mask is not worth it.
MIN_ELEMENTS = 4096
_LANES = 65536  # one int16 lane per element


def check_dropout_kernel(kind: str) -> str:
    """``kind`` when it is one of :data:`DROPOUT_KERNELS`; else a ValueError naming them."""
    if kind not in DROPOUT_KERNELS:
        raise ValueError(
            f"dropout kernel must be one of {', '.join(DROPOUT_KERNELS)}, got {kind!r} "
            "(Dropout(p, kernel=...), ExecutionSettings(dropout_kernel=...) or "
            "PTM_DROPOUT_KERNEL)"
        )
    return kind


def default_dropout_kernel() -> str:
    """The kernel of a module built without one: ``PTM_DROPOUT_KERNEL`` or ``"auto"``."""
    return check_dropout_kernel(os.environ.get("PTM_DROPOUT_KERNEL", "auto"))


def drop_threshold(p: float) -> int:
    """The int16-lane threshold: a lane ``>= threshold - 32768`` keeps its element."""
    return min(_LANES - 1, max(1, round(p * _LANES)))


def keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> Tensor:
    """A uint8 mask of ``shape``: each element 1 (kept) with probability
    ``1 - drop_threshold(p) / 65536``, else 0, independently, from the default generator."""
    count = math.prod(shape)
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=device)
    words.random_(-(2**63), 2**63 - 1)  # the full 64 bits: every int16 lane is uniform
    lanes = words.view(torch.int16)[:count].view(shape)
    keep_from = drop_threshold(p) - _LANES // 2  # a lane >= keep_from keeps its element
    # lanes below keep_from -> keep_from - 1 -> 0; the others -> keep_from -> 1
    return lanes.clamp(keep_from - 1, keep_from).sub_(keep_from - 1).to(torch.uint8)


class _ScaleByMask(torch.autograd.Function):
    """``x * mask * scale`` in x's dtype; backward is the same product of the gradient."""

    # ``forward(ctx, ...)`` rather than ``setup_context``: with ``setup_context`` every
    # ``apply`` binds its arguments through ``inspect.signature`` (about 70 us a call, 2% of
    # a BERT-mini fine-tuning step); this Function never runs under torch.func or compile.
    @staticmethod
    def forward(ctx: Any, x: Tensor, mask: Tensor, scale: float) -> Tensor:
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return torch.addcmul(x.new_zeros(()), x, mask, value=scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (mask,) = ctx.saved_tensors
        return _ScaleByMask.apply(grad, mask, ctx.scale), None, None


def _cheap_mask_applies(x: Tensor, kernel: str) -> bool:
    return (
        kernel == "auto"
        and x.device.type == "cpu"
        and x.is_floating_point()
        and x.numel() >= MIN_ELEMENTS
        and not torch.jit.is_scripting()
        and not torch.compiler.is_compiling()
    )


def dropout(x: Tensor, p: float, training: bool = True, kernel: str = "auto") -> Tensor:
    """:func:`torch.nn.functional.dropout`, with the cheap CPU mask where it applies and
    ``kernel`` is ``"auto"``."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p < 1.0 or not _cheap_mask_applies(x, kernel):
        return F.dropout(x, p, training=True)
    scale = _LANES / (_LANES - drop_threshold(p))
    return _ScaleByMask.apply(x, keep_mask(x.shape, p, x.device), scale)


class Dropout(nn.Dropout):
    """:class:`torch.nn.Dropout` through :func:`dropout` (the same ``p``, repr and
    ``isinstance``; no parameters or buffers, so state dicts do not change).

    Args:
        p: drop probability.
        inplace: as :class:`torch.nn.Dropout` (then torch's kernel runs).
        kernel: one of :data:`DROPOUT_KERNELS`; ``None`` = :func:`default_dropout_kernel`.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, *, kernel: str | None = None) -> None:
        super().__init__(p, inplace)
        self.kernel = default_dropout_kernel() if kernel is None else check_dropout_kernel(kernel)

    def forward(self, input: Tensor) -> Tensor:
        if self.inplace:
            return super().forward(input)
        return dropout(input, self.p, self.training, self.kernel)
