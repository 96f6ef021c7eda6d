"""``trainer.compile`` and ``trainer.cuda_graphs``: how the training step is compiled.

The trainer compiles the step's forward, which is the model *and* its loss (every ptm
training model returns the loss from ``forward``); AOTAutograd compiles the matching
backward with it, so forward, loss and backward run as Inductor kernels. The optimizer step
stays eager: fused AdamW is already one kernel per parameter group.

``cuda_graphs=true`` compiles in ``mode="reduce-overhead"``: Inductor records the step's
kernels into CUDA graphs and replays them, which removes the per-kernel launch cost that
dominates small models on a GPU. It is refused off CUDA (there are no CUDA graphs to
replay; an error says so rather than silently training another way) and with FSDP (its
all-gathers and reduce-scatters run from module hooks outside the captured graph).
Measured on CPU in ``benchmarks/compile_step.py``; the default stays eager.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from ptm_core.training.config import TrainerConfig


def check_compile_switches(config: TrainerConfig, device: torch.device) -> None:
    """Refuse ``cuda_graphs`` where it cannot run.

    Raises:
        ValueError: ``cuda_graphs`` on a device other than CUDA, or together with ``fsdp``.
    """
    if not config.cuda_graphs:
        return
    if device.type != "cuda":
        raise ValueError(
            f"trainer.cuda_graphs=true needs a CUDA device, but this run trains on "
            f"{device.type!r}; set trainer.cuda_graphs=false (trainer.compile=true alone "
            "compiles the step on any device)."
        )
    if config.fsdp:
        raise ValueError(
            "trainer.cuda_graphs=true cannot capture FSDP's collectives (trainer.fsdp=true); "
            "set one of them to false."
        )


def compile_mode(config: TrainerConfig) -> str | None:
    """The ``torch.compile`` mode the settings ask for (``None``: Inductor's default)."""
    return "reduce-overhead" if config.cuda_graphs else None


def compile_forward(forward: nn.Module, config: TrainerConfig) -> nn.Module:
    """``forward`` through ``torch.compile`` when ``config.compile``; else unchanged."""
    if not config.compile:
        return forward
    return cast(nn.Module, torch.compile(forward, mode=compile_mode(config)))
