"""Checkpoint I/O: weights files, JSON configs, state checks and shared tensors.

The bottom of the checkpoint layer: it imports no model class, so every model and every
format module (:mod:`ptm_core.checkpoints.hf`) can use it. Weights are read from
``model.safetensors``, or ``pytorch_model.bin`` through ``torch.load(weights_only=True)``
(never a full unpickle), and written as safetensors inside an atomic directory
(:func:`ptm_core.atomic.atomic_directory`).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from ptm_core import finite_values
from ptm_core.atomic import atomic_directory, atomic_write_text

# The "ptm_format" of a ptm encoder's config.json (checkpoints/encoder.py writes it).
PTM_ENCODER_FORMAT = "ptm-encoder/1"


class CheckpointError(ValueError):
    """A checkpoint cannot be loaded: the message names the file and what is wrong."""


_MISSING_CONFIG = (
    "a checkpoint directory needs config.json and model.safetensors (ptm) or a Hugging Face "
    "BERT config.json with model.safetensors/pytorch_model.bin"
)


def read_json_object(path: Path, missing: str = _MISSING_CONFIG) -> dict[str, Any]:
    """A checkpoint's JSON object file; every failure is a :class:`CheckpointError` naming
    the file (and the line of invalid JSON). ``missing`` says what to do when it is absent."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {missing}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def check_finite(state: dict[str, Tensor], path: Path) -> dict[str, Tensor]:
    """:func:`ptm_core.finite_values.check_finite`, raising :class:`CheckpointError`."""
    return finite_values.check_finite(state, path, CheckpointError)


def read_weights(directory: Path) -> tuple[dict[str, Tensor], Path]:
    """Read the weights file of a checkpoint directory without unpickling code.

    Returns:
        The tensors by name and the file they came from.

    Raises:
        CheckpointError: the file is missing, damaged, holds pickled objects, or a weight
            is NaN or inf (:func:`check_finite`).
    """
    safetensors_path = directory / "model.safetensors"
    bin_path = directory / "pytorch_model.bin"
    try:
        if safetensors_path.exists():
            return check_finite(load_file(safetensors_path), safetensors_path), safetensors_path
        if bin_path.exists():
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise CheckpointError(f"{bin_path}: expected a dict of tensors")
            return check_finite(state, bin_path), bin_path
    except CheckpointError:
        raise
    except pickle.UnpicklingError:
        # torch's message advises weights_only=False: never pass that on for a file that
        # may come from anyone, and this file is not damaged, it holds more than tensors.
        raise CheckpointError(
            f"{bin_path}: holds Python code or objects besides tensors, which ptm will not "
            "unpickle (loading it could run that code). Use a model.safetensors file instead: "
            "most hubs publish one, or convert this file once where you trust its source"
        ) from None
    except Exception as exc:
        path = safetensors_path if safetensors_path.exists() else bin_path
        raise CheckpointError(
            f"{path}: cannot read the weights ({type(exc).__name__}: {exc}); the file is "
            "damaged or truncated, restore or re-export it"
        ) from None
    raise CheckpointError(
        f"{directory}: no model.safetensors or pytorch_model.bin; copy the weights file next "
        "to config.json"
    )


def write_weights(
    state: dict[str, Tensor], path: str | Path, *, metadata: dict[str, str] | None = None
) -> None:
    """Write ``state`` as a safetensors file (inside an :func:`atomic_directory`)."""
    save_file(state, str(path), metadata=metadata)


def write_json(path: str | Path, data: dict[str, Any]) -> None:
    """Write a checkpoint's JSON object file as ptm does (indent 2, final newline)."""
    Path(path).write_text(json.dumps(data, indent=2) + "\n")


def check_state(
    model: torch.nn.Module,
    state: dict[str, Tensor],
    *,
    source: str,
    strict: bool = True,
    unknown: list[str] | None = None,
    missing_source_names: list[str] | None = None,
) -> None:
    """Load ``state`` into ``model``, raising one error that lists every problem.

    Args:
        model: target module.
        state: tensors by ``model``'s parameter names.
        source: file the tensors came from (for the message).
        strict: whether missing or unknown tensors are errors.
        unknown: extra source names that mapped to nothing.
        missing_source_names: source-side names of tensors that were absent.
    """
    expected = model.state_dict()
    problems: list[str] = []
    mismatched = [
        f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
        for k, v in state.items()
        if k in expected and tuple(v.shape) != tuple(expected[k].shape)
    ]
    if mismatched:
        problems.append("shape mismatches:\n  " + "\n  ".join(mismatched))
    missing = missing_source_names or sorted(k for k in expected if k not in state)
    extra = sorted((unknown or []) + [k for k in state if k not in expected])
    if strict and missing:
        problems.append("missing tensors:\n  " + "\n  ".join(missing))
    if strict and extra:
        problems.append("unknown tensors:\n  " + "\n  ".join(extra))
    if problems:
        raise CheckpointError(
            f"{source}: the checkpoint does not fit the model:\n"
            + "\n".join(problems)
            + "\nCheck that config.json matches the weights, or pass strict=False to load "
            "what fits."
        )
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)


def shared_tensor_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that refer to one tensor (ALBERT cross-layer sharing), in ``state_dict`` order.

    Only groups of two or more names are returned.
    """
    groups: dict[int, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def unique_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """``model.state_dict()`` with every shared tensor kept once, under its first name.

    safetensors refuses to write one tensor under two names; :func:`fill_shared_tensors`
    restores the other names on load.
    """
    repeats = {name for names in shared_tensor_groups(model) for name in names[1:]}
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if k not in repeats}


def fill_shared_tensors(model: torch.nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Add the repeated names of shared tensors to ``state`` from the name that is present."""
    groups = shared_tensor_groups(model)
    if not groups:
        return state
    state = dict(state)
    for names in groups:
        present = next((n for n in names if n in state), None)
        if present is not None:
            for name in names:
                state.setdefault(name, state[present])
    return state


__all__ = [
    "CheckpointError",
    "atomic_directory",
    "atomic_write_text",
    "check_finite",
    "check_state",
    "fill_shared_tensors",
    "read_json_object",
    "read_weights",
    "shared_tensor_groups",
    "unique_state",
    "write_json",
    "write_weights",
]
