"""Batches for pre-training: seeded shuffling, padding and the objectives' data side."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from ptm_core.data.shuffle import EpochOrder
from ptm_core.modules.attention_masks import block_diagonal_mask
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.seeding import generator_for

Example = dict[str, Any]
Batch = dict[str, Tensor]
BatchTransform = Callable[[Batch, torch.Generator], Batch]
T = TypeVar("T")

# Per-token keys and the value that pads them; other list keys pad with 0.
PAD_VALUES = {
    "token_type_ids": 0,
    "special_tokens_mask": 1,
    "attention_mask": 0,
    "mlm_labels": -100,
    "lm_labels": -100,
    "position_ids": 0,
    "document_ids": -1,
}


def pad_examples(examples: Sequence[Example], pad_id: int) -> Batch:
    """Stack examples into a batch, right-padding every per-token list.

    Keys starting with ``meta_`` are bookkeeping and are dropped. Integer keys become
    ``(B,)`` tensors, list keys ``(B, L_max)`` tensors, and ``attention_mask`` is added.

    Args:
        examples: dicts of equal keys.
        pad_id: id used to pad ``input_ids``.
    """
    if not examples:
        raise ValueError("cannot build a batch from zero examples")
    length = max(len(e["input_ids"]) for e in examples)
    batch: Batch = {}
    for key in examples[0]:
        if key.startswith("meta_"):
            continue
        values = [e[key] for e in examples]
        if isinstance(values[0], (list, tuple)):
            pad = pad_id if key == "input_ids" else PAD_VALUES.get(key, 0)
            batch[key] = torch.tensor([list(v) + [pad] * (length - len(v)) for v in values])
        else:
            batch[key] = torch.tensor(values)
    if "attention_mask" not in batch:
        batch["attention_mask"] = torch.tensor(
            [[1] * len(e["input_ids"]) + [0] * (length - len(e["input_ids"])) for e in examples]
        )
    return batch


class EpochBatches:
    """Deterministic, resumable batches by position: the order and iteration that every
    ptm batch source shares (pre-training, fine-tuning).

    Each epoch visits every example once in the order :class:`~ptm_core.data.shuffle.EpochOrder`
    draws from ``(seed, epoch)`` (no ``N``-sized permutation is held in the trainer or its
    workers); batch ``i`` of epoch ``e`` is examples ``[i * batch_size, (i + 1) *
    batch_size)`` of that order, built by :meth:`batch`, which subclasses define and which
    must depend only on ``(epoch, i)``. So the trainer resumes mid-epoch by position alone,
    DDP ranks build only their own batches, and worker processes may build batches in any
    order: the result is the same.

    Args:
        examples: the examples (any sequence; indexed lazily, never copied).
        batch_size: examples per batch.
        seed: base seed.
        shuffle: shuffle each epoch (False: corpus order, for evaluation).
        drop_last: drop a final short batch.
        num_workers: worker processes that build batches off the training loop (a
            ``torch.utils.data.DataLoader``); 0 builds them in the training process.
        pin_memory: page-lock batches for faster copies to a GPU (with workers).
        prefetch_factor: batches each worker prepares ahead.
    """

    #: The error for a source without examples (subclasses say where they came from).
    empty_message = "no examples to batch"

    def __init__(
        self,
        examples: Sequence[Any],
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int = 4,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        if not len(examples):
            raise ValueError(self.empty_message)
        self.examples = examples
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.prefetch_factor = prefetch_factor

    @property
    def batches_per_epoch(self) -> int:
        full, rest = divmod(len(self.examples), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def order(self, epoch: int) -> EpochOrder:
        """The example indices in the order epoch ``epoch`` visits them, computed per
        position from ``(seed, epoch)``."""
        return EpochOrder(len(self.examples), self.seed, epoch, shuffle=self.shuffle)

    def indices(self, epoch: int, index: int, order: EpochOrder | None = None) -> list[int]:
        """Example indices of batch ``index`` of ``epoch``."""
        order = order if order is not None else self.order(epoch)
        start = index * self.batch_size
        stop = min(start + self.batch_size, len(order))
        return order.positions(np.arange(start, stop)).tolist()

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        """Build batch ``index`` of ``epoch`` (subclasses)."""
        raise NotImplementedError

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """Yield the batches of ``epoch`` from position ``start`` on."""
        return self.iter_indices(epoch, range(start, self.batches_per_epoch))

    def iter_indices(self, epoch: int, indices: Iterable[int]) -> Iterator[Batch]:
        """Yield batches ``indices`` of ``epoch`` in that order, built in worker processes
        when ``num_workers > 0`` (a DDP rank asks for its own indices only)."""
        indices = list(indices)
        if self.num_workers == 0 or len(indices) < 2:
            order = self.order(epoch)
            for index in indices:
                yield self.batch(epoch, index, order)
            return
        yield from iter_built_in_workers(
            functools.partial(self.batch, epoch),
            indices,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            prefetch_factor=self.prefetch_factor,
            seed=self.seed,
        )


class PretrainingBatches(EpochBatches):
    """A deterministic, resumable source of pre-training batches.

    Each epoch visits every example once in an order drawn from ``(seed, epoch)``; batch
    ``i`` of epoch ``e`` is padded and passed through ``transform`` with a generator
    seeded by ``(seed, e, i)``. So a batch depends only on its position (see
    :class:`EpochBatches`). The global RNG is never touched.

    ``examples`` may be a lazy sequence (rows planned over a memory-mapped corpus, see
    :mod:`ptm_core.data.layouts`): it is indexed, never copied, so memory does not grow
    with the corpus.

    Args:
        examples: the examples (any sequence; indexed lazily).
        batch_size: examples per batch.
        pad_id: padding id.
        transform: the objectives' dynamic data side.
        seed: base seed.
        shuffle: shuffle each epoch.
        drop_last: drop a final short batch.
        num_workers: worker processes that build batches off the training loop (a
            ``torch.utils.data.DataLoader``); 0 builds them in the training process.
        pin_memory: page-lock batches for faster copies to a GPU (with workers).
        prefetch_factor: batches each worker prepares ahead.
        structured_masks: packed rows (``document_ids``) get their ``attention_mask`` as an
            :class:`~ptm_core.modules.attention_structure.AttentionStructure` (the
            ``[B, L]`` document ids; the attention backend runs it block-sparse) instead of
            the ``[B, L, L]`` :func:`block_diagonal_mask`. Off by default.
    """

    empty_message = "no examples to batch: the corpus produced no training rows"

    def __init__(
        self,
        examples: Sequence[Example],
        batch_size: int,
        *,
        pad_id: int,
        transform: BatchTransform | None = None,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        num_workers: int = 0,
        pin_memory: bool = False,
        prefetch_factor: int = 4,
        structured_masks: bool = False,
    ) -> None:
        super().__init__(
            examples,
            batch_size,
            seed=seed,
            shuffle=shuffle,
            drop_last=drop_last,
            num_workers=num_workers,
            pin_memory=pin_memory,
            prefetch_factor=prefetch_factor,
        )
        self.pad_id = pad_id
        self.transform = transform
        self.structured_masks = structured_masks

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        """Build batch ``index`` of ``epoch``."""
        chosen = self.indices(epoch, index, order)
        batch = pad_examples([self.examples[i] for i in chosen], self.pad_id)
        if "document_ids" in batch:  # packed rows: each example sees only itself
            ids = batch["document_ids"]
            batch["attention_mask"] = (
                AttentionStructure.documents(ids)  # type: ignore[assignment]
                if self.structured_masks
                else block_diagonal_mask(ids)
            )
        batch = self.annotate(batch, epoch, index)
        if self.transform is not None:
            batch = self.transform(batch, generator_for(self.seed, epoch, index, "collate"))
        return batch

    def annotate(self, batch: Batch, epoch: int, index: int) -> Batch:
        """Hook for subclasses: add keys that depend on the batch's position (before the
        objectives' ``transform``). Default: unchanged."""
        return batch


def forget_inherited_thread_exits(worker_id: int) -> None:
    """``worker_init_fn`` of ptm's DataLoaders: drop the parent's threading exit callbacks.

    A forked worker inherits the callbacks that the parent's threads registered to run when
    the interpreter shuts down (``threading._register_atexit``), but not those threads.
    Prefect's log and event services register one that asserts its own thread's state, so
    a worker forked inside a flow run (``ptm pretrain ... data.num_workers=N``) failed that
    assertion on its way out, and the DataLoader reported "worker exited unexpectedly with
    exit code 1" when the epoch's workers were shut down.
    """
    callbacks = getattr(threading, "_threading_atexits", None)
    if isinstance(callbacks, list):
        callbacks.clear()


def iter_built_in_workers(
    build: Callable[[int], T],
    indices: Sequence[int],
    *,
    num_workers: int,
    pin_memory: bool = False,
    prefetch_factor: int = 4,
    seed: int = 0,
) -> Iterator[T]:
    """Yield ``build(i)`` for each of ``indices``, in order, built in worker processes.

    ``build`` must pickle (a bound method of a picklable batch source, with
    :func:`functools.partial`); it runs in a ``torch.utils.data.DataLoader`` worker.

    Args:
        build: what one item is, from its index.
        indices: the indices, in the order to yield them.
        num_workers: worker processes (at most one per index).
        pin_memory: page-lock the items for faster copies to a GPU.
        prefetch_factor: items each worker prepares ahead.
        seed: seeds the loader's own generator.
    """
    loader = DataLoader(
        _Built(build, list(indices)),
        batch_size=None,  # items are whole batches already
        shuffle=False,
        num_workers=min(num_workers, len(indices)),
        pin_memory=pin_memory,
        prefetch_factor=prefetch_factor,
        # A loader draws its workers' base seed from this generator, by default the
        # global RNG, which dropout uses too: a resumed run would then draw dropout
        # masks from another point of the stream. Items depend on their index only.
        generator=torch.Generator().manual_seed(seed),
        worker_init_fn=forget_inherited_thread_exits,
    )
    yield from loader


class _Built(Dataset[Any]):
    """Item ``k`` is ``build(indices[k])`` (what a DataLoader worker computes)."""

    def __init__(self, build: Callable[[int], Any], indices: list[int]) -> None:
        self.build = build
        self.indices = indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, item: int) -> Any:
        return self.build(self.indices[item])
