"""The one check that loaded tensors hold no NaN or inf (weights, entity tables, features).

It sits at the bottom of ptm-core, beside ``atomic.py``, so models that read their own
extra weight files (ERNIE-THU's knowledge table) check them without importing checkpoint
code: checkpoints sit above models.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

import torch
from torch import Tensor

State = TypeVar("State", bound=Mapping[str, Tensor])


def check_finite(state: State, path: str | Path, error: type[ValueError] = ValueError) -> State:
    """Return ``state`` unless a floating-point tensor holds NaN or inf.

    Checked once per load (one reduction per tensor): a model with one NaN weight trains
    to NaN losses and predicts nonsense without any other error.

    Args:
        state: tensor name -> tensor, as read from ``path``.
        path: the file the tensors came from (named in the error).
        error: the exception type to raise (``CheckpointError`` for checkpoints).

    Raises:
        ValueError: of type ``error``, naming ``path``, the tensor and how many values are
            not finite.
    """
    for name, tensor in state.items():
        floating = isinstance(tensor, Tensor) and tensor.is_floating_point()
        if floating and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise error(
                f"{path}: tensor {name!r} holds {bad} non-finite value(s) (NaN or inf) of "
                f"{tensor.numel()}; the weights are damaged (often a run that diverged): "
                "load an earlier checkpoint or the model it was trained from"
            )
    return state
