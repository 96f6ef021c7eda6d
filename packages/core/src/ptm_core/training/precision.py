"""Which floating-point precision a training run uses: ``trainer.precision``.

``auto`` picks bf16 autocast where the hardware computes it natively (CUDA devices with
bf16 support; CPUs with AVX-512 BF16 or AMX) and fp32 elsewhere. ``fp32`` and ``bf16``
force one. Under bf16 autocast the parameters, their gradients, the optimizer state and the
checkpoints stay fp32 (master weights); only the autocast-eligible ops (matmuls, mostly)
run in bf16. The environment variable ``PTM_PRECISION`` (``fp32`` / ``bf16``) overrides
``auto`` without editing a config, e.g. ``PTM_PRECISION=fp32`` to reproduce an fp32 run.

On a CPU, bf16 matmuls run through oneDNN, which keeps one compiled primitive per matrix
shape; :func:`bound_onednn_cache` caps that cache for bf16 runs (see there).
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ptm_core.training.config import PRECISIONS

logger = logging.getLogger(__name__)

ENV_VARIABLE = "PTM_PRECISION"
_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
ONEDNN_CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
CPU_BF16_PRIMITIVE_CACHE = 64


def bound_onednn_cache() -> None:
    """Cap oneDNN's primitive cache at 64 entries for a CPU bf16 run, unless the user set
    ``ONEDNN_PRIMITIVE_CACHE_CAPACITY`` already.

    Under bf16 autocast on a CPU every matmul goes through oneDNN, which caches one
    primitive per shape, 1,024 by default. Unpadded and length-grouped batches give almost
    every batch new shapes, so the cache only grows: over one epoch of BERT-mini
    fine-tuning (1,008 rows of a length spread, batch 16) the process grew by 930 MB,
    against 640 MB with 64 entries (and 370 MB in fp32), for 2-3% more CPU time
    (``benchmarks/results/finetune_speed.md``). The layers of one step share their shapes,
    so 64 entries still serve a step's forward and backward. oneDNN reads the variable when
    it builds its first primitive: set before a process's first bf16 matmul, which is
    where the trainer and the predictor call this.
    """
    os.environ.setdefault(ONEDNN_CACHE_VARIABLE, str(CPU_BF16_PRIMITIVE_CACHE))


@dataclass(frozen=True)
class PrecisionChoice:
    """The resolved precision and why: ``dtype`` is the autocast dtype (``None`` = fp32)."""

    dtype: torch.dtype | None
    reason: str

    @property
    def name(self) -> str:
        return "bf16" if self.dtype == torch.bfloat16 else "fp32"


def _cpuinfo_flags(path: Path = Path("/proc/cpuinfo")) -> set[str]:
    try:
        text = path.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


@functools.cache
def cpu_supports_bf16() -> bool:
    """Whether this CPU runs bf16 matmuls natively (AVX-512 BF16 or AMX).

    Asks torch's own CPU feature detection (``torch.cpu._is_avx512_bf16_supported`` /
    ``_is_amx_tile_supported``, what oneDNN dispatches on) and falls back to the
    ``/proc/cpuinfo`` flags ``avx512_bf16`` / ``amx_bf16`` when those are missing.
    """
    probes = [
        getattr(torch.cpu, name, None)
        for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    ]
    if all(probe is not None for probe in probes):
        try:
            return any(bool(probe()) for probe in probes if probe is not None)
        except RuntimeError:  # pragma: no cover - a build whose probes cannot run
            pass
    return bool(_cpuinfo_flags() & set(_CPU_FLAGS))


def _cuda_supports_bf16(device: torch.device) -> bool:
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def choose_precision(precision: str, device: torch.device | str) -> PrecisionChoice:
    """Resolve ``trainer.precision`` on ``device``, with the reason (for the start-up log).

    Raises:
        ValueError: ``precision`` (or ``PTM_PRECISION``) is not one of ``auto|fp32|bf16``.
    """
    device = torch.device(device)
    if precision not in PRECISIONS:
        raise ValueError(
            f"trainer.precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
        )
    if precision == "fp32":
        return PrecisionChoice(None, "trainer.precision=fp32")
    if precision == "bf16":
        return PrecisionChoice(torch.bfloat16, "trainer.precision=bf16")
    forced = os.environ.get(ENV_VARIABLE, "").strip().lower()
    if forced:
        if forced not in ("fp32", "bf16"):
            raise ValueError(f"{ENV_VARIABLE} must be 'fp32' or 'bf16' (or unset), got {forced!r}")
        dtype = torch.bfloat16 if forced == "bf16" else None
        return PrecisionChoice(dtype, f"trainer.precision=auto, overridden by {ENV_VARIABLE}")
    if device.type == "cuda":
        if _cuda_supports_bf16(device):
            return PrecisionChoice(torch.bfloat16, "auto: this CUDA device supports bf16")
        return PrecisionChoice(None, "auto: this CUDA device has no native bf16")
    if device.type == "cpu":
        if cpu_supports_bf16():
            return PrecisionChoice(torch.bfloat16, "auto: this CPU has AVX-512 BF16 / AMX")
        return PrecisionChoice(None, "auto: this CPU has no AVX-512 BF16 or AMX")
    return PrecisionChoice(None, f"auto: bf16 is not chosen automatically on {device.type}")


def resolve_precision(precision: str, device: torch.device | str) -> torch.dtype | None:
    """The autocast dtype ``trainer.precision`` means on ``device``; ``None`` = fp32."""
    return choose_precision(precision, device).dtype
