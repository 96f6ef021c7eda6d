"""Global RNG states (torch CPU/CUDA, Python, NumPy) captured for bit-identical resume."""

from __future__ import annotations

import logging
import random
from typing import Any, cast

import numpy as np
import torch

logger = logging.getLogger(__name__)


def rng_file(rank: int) -> str:
    """The name of rank ``rank``'s RNG file in a checkpoint written by several processes
    (DDP: ranks above 0; FSDP: every rank). Rank 0's is ``rng.pt`` in a DDP checkpoint."""
    return f"rng-rank{rank:05d}.pt"


def capture_rng_state() -> dict[str, Any]:
    """Return the global torch (CPU and CUDA), Python and NumPy RNG states."""
    legacy = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state(legacy=True))
    mt, keys, pos, has_gauss, cached = legacy
    return {
        "torch_cpu": torch.get_rng_state(),
        "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
        # As a tensor so that torch.load(weights_only=True) accepts it.
        "numpy": {
            "kind": mt,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Restore RNG states captured by :func:`capture_rng_state`.

    Args:
        state: The captured states.
    """
    torch.set_rng_state(state["torch_cpu"])
    cuda_states = state.get("torch_cuda", [])
    if cuda_states and torch.cuda.is_available():
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)
        else:
            logger.warning(
                "Checkpoint has %d CUDA RNG states for %d devices; not restored.",
                len(cuda_states),
                torch.cuda.device_count(),
            )
    elif cuda_states or torch.cuda.is_available():
        logger.warning(
            "Resuming across CPU/CUDA: the CUDA RNG is not restored, so random "
            "ops on the GPU will differ from an uninterrupted run."
        )
    random.setstate(state["python"])
    np_state = state["numpy"]
    np.random.set_state(
        (
            np_state["kind"],
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
