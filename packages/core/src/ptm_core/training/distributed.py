"""Data-parallel training: joining a torchrun process group and sharding the batches."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ptm_core.training.protocols import Batch, BatchSource

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistributedContext:
    """Where this process stands in the job.

    Attributes:
        rank: global rank (0 writes metrics and checkpoints).
        world_size: number of processes.
        local_rank: rank on this node (picks the CUDA device).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(backend: str = "auto", device_type: str = "cpu") -> DistributedContext:
    """Join the process group ``torchrun`` describes in the environment, if any.

    Single-process runs (no ``WORLD_SIZE`` or ``WORLD_SIZE=1``) get a disabled context and
    never touch ``torch.distributed``.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistributedContext()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        chosen = backend if backend != "auto" else ("nccl" if device_type == "cuda" else "gloo")
        dist.init_process_group(backend=chosen)
        logger.info("joined process group: rank %d of %d (%s)", rank, world_size, chosen)
    return DistributedContext(rank=rank, world_size=world_size, local_rank=local_rank)


def is_main_process() -> bool:
    """True outside distributed runs and on rank 0."""
    return not dist.is_initialized() or dist.get_rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op when not distributed)."""
    if dist.is_initialized():
        dist.barrier()


def mean_across_ranks(value: torch.Tensor) -> torch.Tensor:
    """All-reduce mean of a tensor for logging (identity when not distributed).

    NCCL reduces only CUDA tensors, so the value travels on this rank's GPU there and
    comes back on the device it came from.
    """
    if not dist.is_initialized():
        return value
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else value.device
    )
    reduced = value.detach().to(device=device, dtype=torch.float32, copy=True)
    dist.all_reduce(reduced)
    return (reduced / dist.get_world_size()).to(value.device)


class ShardedBatches:
    """Rank ``r`` of ``n`` takes batches ``r, r + n, r + 2n, ...`` of each epoch.

    Positions are counted in rounds of ``n`` batches, so the trainer's data position (and
    resume) works unchanged; the last ``batches_per_epoch mod n`` batches of an epoch are
    dropped so every rank does the same number of steps. A source with a
    ``batch(epoch, index)`` method (every ptm batch source) is asked for this rank's
    batches only; any other source is iterated and the other ranks' batches skipped.

    Args:
        source: the full batch source (deterministic given epoch and index).
        rank: this process's rank.
        world_size: number of processes.
    """

    def __init__(self, source: BatchSource, rank: int, world_size: int) -> None:
        if source.batches_per_epoch < world_size:
            raise ValueError(
                f"{source.batches_per_epoch} batches per epoch cannot feed {world_size} "
                "processes; use a smaller batch size or fewer devices"
            )
        self.source = source
        self.rank = rank
        self.world_size = world_size

    @property
    def batches_per_epoch(self) -> int:
        return self.source.batches_per_epoch // self.world_size

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        wanted = start * self.world_size + self.rank
        stop = self.batches_per_epoch * self.world_size
        own = getattr(self.source, "iter_indices", None)
        if callable(own):
            # Only this rank's batches are built (in worker processes when the source has them).
            yield from own(epoch, range(wanted, stop, self.world_size))
            return
        build = getattr(self.source, "batch", None)
        if callable(build):
            # A source with random access (``batch(epoch, index)``, as every ptm batch
            # source has) builds only this rank's batches.
            for index in range(wanted, stop, self.world_size):
                yield build(epoch, index)
            return
        for index, batch in enumerate(self.source.iter_batches(epoch, wanted), start=wanted):
            if index >= stop:
                return
            if (index - self.rank) % self.world_size == 0:
                yield batch
