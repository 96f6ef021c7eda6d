"""Training checkpoints: atomic step directories, the ``latest`` pointer, resume and pruning.

Layout under ``<output_dir>/checkpoints/``::

    step-00000500/  model.safetensors  config.json  optimizer.pt  rng.pt  trainer_state.json
    latest          text file holding the newest complete directory name

Each step directory is written under a ``.tmp-`` name and renamed when complete, so any
``step-*`` directory with a ``trainer_state.json`` is whole.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import safetensors.torch
import torch
from torch import nn

from ptm_core.atomic import TRAINING_HINT, atomic_directory, atomic_write_text
from ptm_core.checkpoints import CheckpointError
from ptm_core.training.rng_state import capture_rng_state, restore_rng_state, rng_file

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
LATEST = "latest"
WEIGHTS = "model.safetensors"
MODEL_CONFIG = "config.json"
OPTIMIZER = "optimizer.pt"
RNG = "rng.pt"
TRAINER_STATE = "trainer_state.json"
# trainer.fsdp=true writes model and optimizer shards here instead (training/sharding.py).
SHARDED_DIR = "dcp"
_STEP_DIR = re.compile(r"^step-(\d{8})$")
# Names ptm_core.atomic and _remove_dir give unfinished work; such entries are never complete.
_TEMP_SUFFIXES = (".tmp", ".old", ".deleting")

T = TypeVar("T")


def _broken(file: Path, problem: str) -> CheckpointError:
    return CheckpointError(
        f"{file}: {problem}. The checkpoint {file.parent} is incomplete or corrupted: delete "
        "that directory to resume from the previous checkpoint, or set resume=false to start over."
    )


def _unreadable(file: Path, exc: Exception) -> CheckpointError:
    # torch's unpickling errors advise weights_only=False, which must not be taken for a file
    # that failed to load: show only the error type for them.
    if isinstance(exc, pickle.UnpicklingError):
        reason = f"{type(exc).__name__}: not a state file that loads with weights_only=True"
    else:
        lines = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"
    return _broken(file, f"cannot be read ({reason})")


def _read(file: Path, reader: Callable[[Path], T]) -> T:
    if not file.is_file():
        raise _broken(file, "file is missing")
    try:
        return reader(file)
    except Exception as exc:  # any decode failure means the same thing to the user
        raise _unreadable(file, exc) from exc


def step_dir_name(step: int) -> str:
    """Return the directory name of the checkpoint for ``step`` (``step-00000500``)."""
    return f"step-{step:08d}"


def _complete_step_dirs(checkpoints_dir: Path) -> list[tuple[int, Path]]:
    if not checkpoints_dir.is_dir():
        return []
    found = []
    for child in checkpoints_dir.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / TRAINER_STATE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def find_latest_checkpoint(checkpoints_dir: Path) -> Path | None:
    """Return the newest complete checkpoint directory, or ``None`` if there is none.

    The ``latest`` pointer is trusted when it names an existing directory; a complete
    directory with a higher step also wins (a crash between the rename and the pointer
    update leaves exactly that). Temp directories are never considered.

    Args:
        checkpoints_dir: ``<output_dir>/checkpoints``.

    Returns:
        The checkpoint directory, or ``None``.

    Raises:
        CheckpointError: If ``latest`` names a directory that has no ``trainer_state.json``.
    """
    scanned = _complete_step_dirs(checkpoints_dir)
    pointer = checkpoints_dir / LATEST
    if pointer.is_file():
        name = pointer.read_text(encoding="utf-8").strip()
        target = checkpoints_dir / name
        if _STEP_DIR.match(name) and target.is_dir():
            if not (target / TRAINER_STATE).is_file():
                raise _broken(target / TRAINER_STATE, f"file is missing (named by {pointer})")
            if not scanned or scanned[-1][1] == target:
                return target
            logger.warning("%s names %s but %s is newer; using it.", pointer, name, scanned[-1][1])
        else:
            logger.warning("%s names %r, which does not exist; scanning instead.", pointer, name)
    return scanned[-1][1] if scanned else None


def _resolve_weights(path: Path) -> Path:
    if path.is_file():
        return path
    if (path / WEIGHTS).exists() or (path / TRAINER_STATE).exists():
        return path / WEIGHTS
    latest = find_latest_checkpoint(path / "checkpoints")
    if latest is None:
        raise CheckpointError(
            f"{path}: no checkpoint found (expected a {WEIGHTS} file, a checkpoint directory "
            "holding one, or a training output_dir with checkpoints/)."
        )
    return latest / WEIGHTS


def _load_weights(file: Path, model: nn.Module, device: torch.device, strict: bool) -> None:
    try:
        safetensors.torch.load_model(model, file, strict=strict, device=str(device))
    except RuntimeError as exc:
        if "Error(s) in loading state_dict" in str(exc):
            raise CheckpointError(
                f"{file} does not fit {type(model).__name__}: {exc}. Build the model with the "
                f"settings in {file.parent / MODEL_CONFIG} (if present) before loading."
            ) from exc
        raise _unreadable(file, exc) from exc
    except Exception as exc:
        raise _unreadable(file, exc) from exc


def load_checkpoint(path: str | Path, model: nn.Module, *, strict: bool = True) -> Path:
    """Load only the weights of a checkpoint into ``model`` (for evaluation or fine-tuning).

    Args:
        path: A ``model.safetensors`` file, a checkpoint directory, or a training
            ``output_dir`` (its newest complete checkpoint is used).
        model: The model to fill, built with the same architecture.
        strict: Require the key sets to match exactly.

    Returns:
        The weights file that was loaded.

    Raises:
        CheckpointError: If no checkpoint is found, the file is corrupted, or it does not fit.
    """
    file = _resolve_weights(Path(path))
    if not file.is_file() and (file.parent / SHARDED_DIR).is_dir():
        raise CheckpointError(
            f"{file.parent} is a sharded training checkpoint (trainer.fsdp=true): its weights "
            "are split across processes. Load the run's final/ directory, resume the run with "
            "trainer.fsdp=true, or convert it with torch.distributed.checkpoint.format_utils."
            "dcp_to_torch_save."
        )
    if not file.is_file():
        raise _broken(file, "file is missing")
    device = next(iter(model.parameters()), torch.empty(0)).device
    _load_weights(file, model, device, strict)
    return file


def save_checkpoint(
    checkpoints_dir: Path,
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    trainer_state: dict[str, Any],
    rank_rng_states: Sequence[dict[str, Any]] | None = None,
) -> Path:
    """Write a complete checkpoint for ``step`` atomically and point ``latest`` at it.

    Args:
        checkpoints_dir: ``<output_dir>/checkpoints`` (created if missing).
        step: The optimizer step just finished.
        model: The model; ``model.checkpoint_config()``, if defined, goes to ``config.json``.
        optimizer: Its state goes to ``optimizer.pt``.
        scheduler: Its state goes to ``optimizer.pt``.
        trainer_state: JSON-ready loop state (data position, config, ...).
        rank_rng_states: every rank's RNG states under DDP (rank 0 first), gathered by the
            caller; ranks above 0 get ``rng-rank<r>.pt`` so that a resume gives each rank
            its own dropout stream back.

    Returns:
        The finished checkpoint directory.
    """
    checkpoints_dir.mkdir(parents=True, exist_ok=True)
    final = checkpoints_dir / step_dir_name(step)
    with atomic_directory(final, kind="checkpoint", hint=TRAINING_HINT) as tmp:
        safetensors.torch.save_model(model, str(tmp / WEIGHTS), metadata={"format": "pt"})
        config_fn = getattr(model, "checkpoint_config", None)
        if callable(config_fn):
            (tmp / MODEL_CONFIG).write_text(json.dumps(config_fn(), indent=2, sort_keys=True))
        torch.save(
            {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
            tmp / OPTIMIZER,
        )
        torch.save(capture_rng_state(), tmp / RNG)
        for rank, rng in enumerate(rank_rng_states or []):
            if rank > 0:
                torch.save(rng, tmp / rng_file(rank))
        state = {"format_version": FORMAT_VERSION, "step": step, **trainer_state}
        (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=2))
    atomic_write_text(checkpoints_dir / LATEST, final.name + "\n")
    return final


def load_training_state(
    checkpoint: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    device: torch.device,
) -> dict[str, Any]:
    """Restore model, optimizer, scheduler and RNG states from a checkpoint directory.

    Args:
        checkpoint: A directory written by :func:`save_checkpoint`.
        model: Receives the weights.
        optimizer: Receives its state.
        scheduler: Receives its state.
        device: Device the model lives on.

    Returns:
        The contents of ``trainer_state.json``.

    Raises:
        CheckpointError: If a file is missing, corrupted, or of another format version.
    """
    state_file = checkpoint / TRAINER_STATE
    state: dict[str, Any] = _read(state_file, lambda f: json.loads(f.read_text(encoding="utf-8")))
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{state_file}: format_version {state.get('format_version')!r} is not "
            f"{FORMAT_VERSION}, which this ptm-core writes; resume with the ptm-core version "
            "that wrote it, or set resume=false to start over."
        )
    # Read every file before changing anything, so a broken one leaves the model untouched.
    optim_state = _read(checkpoint / OPTIMIZER, lambda f: torch.load(f, weights_only=True))
    rng_state = _read(checkpoint / RNG, lambda f: torch.load(f, weights_only=True))
    weights = checkpoint / WEIGHTS
    if not weights.is_file():
        raise _broken(weights, "file is missing")
    _load_weights(weights, model, device, strict=True)
    try:
        optimizer.load_state_dict(optim_state["optimizer"])
        scheduler.load_state_dict(optim_state["scheduler"])
    except (KeyError, ValueError) as exc:
        raise CheckpointError(
            f"{checkpoint / OPTIMIZER} does not fit this model's optimizer ({exc}); resume "
            "with the model and settings that wrote it, or set resume=false to start over."
        ) from exc
    restore_rng_state(rng_state)
    return state


def prune_checkpoints(checkpoints_dir: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` complete checkpoints.

    Args:
        checkpoints_dir: ``<output_dir>/checkpoints``.
        keep_last: How many to keep, ``>= 1``.

    Returns:
        The directories removed.
    """
    doomed = [path for _, path in _complete_step_dirs(checkpoints_dir)[:-keep_last]]
    for path in doomed:
        _remove_dir(path)
    return doomed


def _remove_dir(path: Path) -> None:
    # Rename first (atomic), then delete: a crash mid-delete leaves a temp name that scans
    # skip, never a half-deleted step-* directory that still looks complete.
    doomed = path.with_name(f".{path.name}.deleting")
    shutil.rmtree(doomed, ignore_errors=True)  # an earlier crashed delete
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def remove_temp_dirs(checkpoints_dir: Path) -> None:
    """Remove leftovers of writes or deletes that crashed; they are never complete checkpoints.

    Args:
        checkpoints_dir: ``<output_dir>/checkpoints``.
    """
    if not checkpoints_dir.is_dir():
        return
    for child in checkpoints_dir.iterdir():
        if child.name.startswith(".") and child.name.endswith(_TEMP_SUFFIXES):
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
