"""What the trainer needs from models, data and callbacks, stated as duck types."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

Batch = dict[str, torch.Tensor]


@runtime_checkable
class ModelOutput(Protocol):
    """What ``model(batch)`` must return.

    Attributes:
        loss: The scalar (0-d) loss to minimise.
        metrics: Scalars to log (per-objective losses, accuracies); tensors must be 0-d.
            They are averaged between log lines; a name the trainer uses itself (``loss``,
            ``lr``, ``grad_norm``, ...) is logged as ``model/<name>``.
    """

    @property
    def loss(self) -> torch.Tensor: ...

    @property
    def metrics(self) -> Mapping[str, float | torch.Tensor]: ...


@runtime_checkable
class BatchSource(Protocol):
    """A deterministic, restartable stream of batches.

    ``iter_batches(epoch, start)`` must yield the same batches for the same arguments (shuffle
    with a generator seeded from the epoch, never the global RNG), beginning at batch index
    ``start`` of that epoch. This is what makes resuming bit-identical.
    """

    @property
    def batches_per_epoch(self) -> int: ...

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]: ...


class TrainerCallback:
    """Hooks the trainer calls; subclass and override, or pass any object with these methods.

    Every method is optional on duck-typed callbacks. An exception raised in a hook stops
    training (the last checkpoint stays valid). The trainer calls them on rank 0 only.
    """

    def on_train_begin(self, step: int, output_dir: Path) -> None:
        """Called once per :meth:`Trainer.fit`, after resuming, before the first step.

        Args:
            step: The step training starts from (0 for a fresh run; the checkpoint's step
                on resume: ``metrics.jsonl`` has just been cut back to it).
            output_dir: The run directory.
        """

    def on_train_end(self, step: int) -> None:
        """Called once when :meth:`Trainer.fit` ends, also when it ends with an exception.

        Args:
            step: The last optimizer step completed.
        """

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        """Called after a metrics line is written.

        Args:
            step: The optimizer step just finished.
            record: The metrics line as written to ``metrics.jsonl``.
        """

    def on_save(self, step: int, path: Path) -> None:
        """Called after a checkpoint is complete and ``latest`` points to it.

        Args:
            step: The optimizer step saved.
            path: The checkpoint directory.
        """
