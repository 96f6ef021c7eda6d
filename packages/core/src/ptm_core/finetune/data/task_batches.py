"""A deterministic, resumable batch source over task rows, featurized per batch."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from ptm_core.data.batches import iter_built_in_workers
from ptm_core.data.shuffle import EpochOrder
from ptm_core.finetune.data.features import Batch, Featurizer


class TaskBatches:
    """Batches of fine-tuning rows: the core trainer's ``BatchSource``.

    Epoch ``e`` visits every row once in the order :class:`~ptm_core.data.shuffle.EpochOrder`
    draws from ``(seed, e)`` (corpus order with ``shuffle=False``, for evaluation); batch
    ``i`` is rows ``[i * batch_size, (i + 1) * batch_size)`` of that order, featurized when
    it is asked for and padded to its longest row. A batch depends only on
    ``(seed, epoch, i)``, so ``iter_batches(epoch, start)`` is the tail of the full epoch
    and a resumed run sees the same batches. Only the rows of one batch are ever tokenized
    at a time.

    Args:
        rows: examples (a reader's lazy sequence), or :class:`~ptm_core.finetune.data.qa.QAWindows`
            for QA.
        featurizer: turns a list of rows into a batch (``featurize``).
        batch_size: rows per batch.
        seed: base seed of the shuffling.
        shuffle: shuffle each epoch (training) or keep the rows' order (evaluation).
        drop_last: drop a final short batch.
        feature_index: add ``feature_index (B,)``, each row's position in ``rows`` (QA
            evaluation batches carry it so logits map back to windows).
        num_workers: worker processes that featurize batches off the training loop.
    """

    def __init__(
        self,
        rows: Sequence[Any],
        featurizer: Featurizer,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        feature_index: bool = False,
        num_workers: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not len(rows):
            raise ValueError("no rows to batch: the task file gave no examples")
        self.rows = rows
        self.featurizer = featurizer
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.feature_index = feature_index
        self.num_workers = num_workers

    @property
    def batches_per_epoch(self) -> int:
        """Batches in one epoch."""
        full, rest = divmod(len(self.rows), self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def __len__(self) -> int:
        return self.batches_per_epoch

    def order(self, epoch: int) -> EpochOrder:
        """Row indices in the order epoch ``epoch`` visits them."""
        return EpochOrder(len(self.rows), self.seed, epoch, shuffle=self.shuffle)

    def indices(self, epoch: int, index: int, order: EpochOrder | None = None) -> list[int]:
        """Row indices of batch ``index`` of ``epoch``."""
        order = order if order is not None else self.order(epoch)
        start = index * self.batch_size
        stop = min(start + self.batch_size, len(order))
        return order.positions(np.arange(start, stop)).tolist()

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        """Build batch ``index`` of ``epoch``."""
        chosen = self.indices(epoch, index, order)
        batch = self.featurizer.featurize([self.rows[i] for i in chosen])
        if self.feature_index:
            batch["feature_index"] = torch.tensor(chosen, dtype=torch.long)
        return batch

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        """Yield the batches of ``epoch`` from batch ``start`` on."""
        indices = range(start, self.batches_per_epoch)
        if self.num_workers == 0 or len(indices) < 2:
            order = self.order(epoch)
            for index in indices:
                yield self.batch(epoch, index, order)
            return
        yield from iter_built_in_workers(
            functools.partial(self.batch, epoch),
            list(indices),
            num_workers=self.num_workers,
            seed=self.seed,
        )


__all__ = ["TaskBatches"]
