"""FSDP2 training: shard the model across ranks, save and resume through DCP, export full weights.

``trainer.fsdp=true`` replaces DDP's replicas with FSDP2 (``fully_shard``; Zhao et al.,
2023, "PyTorch FSDP"): each Transformer layer (:func:`~ptm_core.training.memory.transformer_units`)
is one unit whose parameters are all-gathered just before its forward and backward and
freed after, then the whole model is the root unit (embeddings, heads, final norms).
Gradients are reduce-scattered (averaged across ranks, as DDP does), and AdamW's state lives
with each rank's shard only.

The user's model is never sharded in place: a copy on the ``meta`` device (no memory) is
sharded, materialised shard by shard on the training device and filled from the user's
model. At the end of training :func:`copy_full_weights` gathers the trained weights back
into the user's model, in fp32, one tensor at a time, so ``final/`` is written by the
family's usual ``save_pretrained`` and every loader reads it.

Sharded checkpoints (``step-*/`` under ``checkpoints/``)::

    dcp/                  torch.distributed.checkpoint files: model and optimizer shards
    scheduler.pt          the learning-rate schedule
    rng-rank00000.pt ...  each rank's RNG states (dropout differs per rank)
    config.json           model.checkpoint_config(), when the model has one
    trainer_state.json    data position, metrics window, settings; "layout": "dcp"

Every rank writes into one ``.step-*.sharded.tmp`` directory; after a barrier rank 0
renames it to ``step-*``, so a directory with that name is always complete.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

from ptm_core.atomic import atomic_write_text
from ptm_core.checkpoints import CheckpointError
from ptm_core.training.checkpointing import (
    FORMAT_VERSION,
    LATEST,
    MODEL_CONFIG,
    SHARDED_DIR,
    TRAINER_STATE,
    WEIGHTS,
    step_dir_name,
)
from ptm_core.training.memory import transformer_units
from ptm_core.training.rng_state import capture_rng_state, restore_rng_state, rng_file

LAYOUT = "dcp"
SHARDS = SHARDED_DIR
SCHEDULER = "scheduler.pt"


def shard_model(model: nn.Module, device: torch.device, *, bf16: bool) -> nn.Module:
    """An FSDP2-sharded copy of ``model`` on ``device``, holding ``model``'s weights.

    Args:
        model: the model to train (left as it is; it may live on the CPU).
        device: this rank's training device.
        bf16: all-gather parameters in bf16 for the forward and backward, reduce gradients
            in fp32 (``MixedPrecisionPolicy``); otherwise everything stays fp32. The
            sharded master weights and the optimizer state are fp32 either way.

    Returns:
        The sharded copy (its parameters are ``DTensor`` shards).

    Raises:
        ValueError: two units share parameters (ALBERT's ``share_layers="attention"`` or
            ``"ffn"``), which FSDP cannot split into separate units.
    """
    if not dist.is_initialized():
        raise ValueError(
            "trainer.fsdp=true shards the model across processes, but this process is "
            "alone (no WORLD_SIZE > 1): start it through torchrun --nproc-per-node=N (the "
            "pretrain flow, `ptm flow pretrain`, does so for trainer.devices > 1), or set "
            "trainer.fsdp=false."
        )
    owner: dict[int, str] = {}
    for name, unit in transformer_units(model):
        for param in unit.parameters():
            if id(param) in owner:
                raise ValueError(
                    f"trainer.fsdp=true cannot shard {owner[id(param)]} and {name} apart: they "
                    "share parameters (cross-layer sharing such as ALBERT's share_layers="
                    "'attention' or 'ffn'); train this model with trainer.fsdp=false (DDP)."
                )
            owner[id(param)] = name
    memo: dict[int, Any] = {
        id(param): nn.Parameter(torch.empty_like(param, device="meta"), param.requires_grad)
        for param in model.parameters()
    }
    sharded = copy.deepcopy(model, memo)  # the structure only: parameters are on meta
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if bf16
        else MixedPrecisionPolicy()
    )
    for _, unit in transformer_units(sharded):
        fully_shard(unit, mesh=mesh, mp_policy=policy)
    fully_shard(sharded, mesh=mesh, mp_policy=policy)
    sharded.to_empty(device=device)  # each rank allocates its shards only
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            sharded.get_buffer(name).copy_(buffer)
    set_model_state_dict(
        sharded, model.state_dict(), options=StateDictOptions(full_state_dict=True)
    )
    return sharded


def copy_full_weights(sharded: nn.Module, model: nn.Module) -> None:
    """Gather the trained weights of ``sharded`` into ``model``, tensor by tensor, in fp32.

    A collective: every rank calls it and every rank's ``model`` ends with the full
    weights. One full tensor at a time is gathered, so the extra memory is the largest
    tensor, not the model.
    """
    target = model.state_dict()
    with torch.no_grad():
        for name, value in sharded.state_dict().items():
            full = value.full_tensor() if isinstance(value, DTensor) else value
            target[name].copy_(full)


def local_value(value: torch.Tensor) -> torch.Tensor:
    """A replicated ``DTensor`` (a gradient norm) as a plain tensor; others unchanged."""
    return value.full_tensor() if isinstance(value, DTensor) else value


def save_sharded_checkpoint(
    checkpoints_dir: Path,
    *,
    step: int,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    trainer_state: dict[str, Any],
) -> Path:
    """Write a sharded checkpoint for ``step`` from every rank, atomically (a collective).

    Args:
        checkpoints_dir: ``<output_dir>/checkpoints`` (shared by all ranks).
        step: The optimizer step just finished.
        model: The FSDP-sharded model.
        optimizer: Its optimizer (state sharded like the parameters).
        scheduler: Written by rank 0.
        trainer_state: JSON-ready loop state, written by rank 0.

    Returns:
        The finished checkpoint directory.
    """
    rank = dist.get_rank()
    final = checkpoints_dir / step_dir_name(step)
    tmp = checkpoints_dir / f".{final.name}.sharded.tmp"
    if rank == 0:
        checkpoints_dir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    dist.barrier()
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=tmp / SHARDS)
    torch.save(capture_rng_state(), tmp / rng_file(rank))
    if rank == 0:
        torch.save({"scheduler": scheduler.state_dict()}, tmp / SCHEDULER)
        config_fn = getattr(model, "checkpoint_config", None)
        if callable(config_fn):
            (tmp / MODEL_CONFIG).write_text(json.dumps(config_fn(), indent=2, sort_keys=True))
        state = {
            "format_version": FORMAT_VERSION,
            "step": step,
            "layout": LAYOUT,
            "world_size": dist.get_world_size(),
            **trainer_state,
        }
        (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=2))
    dist.barrier()  # every rank's files are written
    if rank == 0:
        _fsync_tree(tmp)
        if final.exists():
            doomed = final.with_name(f".{final.name}.deleting")
            shutil.rmtree(doomed, ignore_errors=True)
            os.replace(final, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        os.replace(tmp, final)
        atomic_write_text(checkpoints_dir / LATEST, final.name + "\n")
    dist.barrier()
    return final


def _fsync_tree(root: Path) -> None:
    for folder, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def is_sharded_checkpoint(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` was written by :func:`save_sharded_checkpoint`."""
    return (checkpoint / SHARDS).is_dir()


def load_sharded_checkpoint(
    checkpoint: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> tuple[dict[str, Any], bool]:
    """Restore model and optimizer shards, the schedule and this rank's RNG (a collective).

    Returns:
        The contents of ``trainer_state.json`` and whether this rank's RNG state was
        restored (ranks above 0 are not when the number of processes changed: the trainer
        gives them fresh streams).

    Raises:
        CheckpointError: a file is missing or corrupted, or the checkpoint is not sharded.
    """
    state_file = checkpoint / TRAINER_STATE
    try:
        state: dict[str, Any] = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"{state_file} cannot be read ({type(exc).__name__}: {exc}); delete {checkpoint} "
            "to resume from the previous checkpoint, or set resume=false to start over."
        ) from exc
    if state.get("layout") != LAYOUT or not is_sharded_checkpoint(checkpoint):
        raise CheckpointError(
            f"{checkpoint} is a single-file checkpoint ({WEIGHTS}) written without "
            "trainer.fsdp; resume it with trainer.fsdp=false, or set resume=false to start over."
        )
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{state_file}: format_version {state.get('format_version')!r} is not "
            f"{FORMAT_VERSION}; resume with the ptm-core version that wrote it, or set "
            "resume=false to start over."
        )
    try:
        schedule = torch.load(checkpoint / SCHEDULER, weights_only=True)
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dcp.load(
            {"model": model_state, "optimizer": optimizer_state}, checkpoint_id=checkpoint / SHARDS
        )
    except Exception as exc:
        raise CheckpointError(
            f"{checkpoint} cannot be restored ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}); resume "
            "with the model and settings that wrote it, delete that directory to use the "
            "previous checkpoint, or set resume=false to start over."
        ) from exc
    set_state_dict(
        model,
        optimizer,
        model_state_dict=model_state,  # filled in place by dcp.load
        optim_state_dict=optimizer_state,
    )
    scheduler.load_state_dict(schedule["scheduler"])
    rank = dist.get_rank()
    own_rng = checkpoint / rng_file(rank)
    # With another number of processes only rank 0 keeps its stream (as DDP resumes do).
    if own_rng.is_file() and (rank == 0 or state.get("world_size") == dist.get_world_size()):
        restore_rng_state(torch.load(own_rng, weights_only=True))
        return state, True
    return state, False
