"""A deterministic, resumable batch source over task rows, featurized per batch."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from ptm_core.data.batches import EpochBatches
from ptm_core.data.prefetch import iter_prefetched
from ptm_core.data.shuffle import EpochOrder
from ptm_core.finetune.data.features import Batch, Featurizer
from ptm_core.finetune.data.length_groups import LengthGroupedOrder


class TaskBatches(EpochBatches):
    """Batches of fine-tuning rows: the core trainer's ``BatchSource``.

    Epoch ``e`` visits every row once in the order :class:`~ptm_core.data.shuffle.EpochOrder`
    draws from ``(seed, e)`` (corpus order with ``shuffle=False``, for evaluation); batch
    ``i`` is rows ``[i * batch_size, (i + 1) * batch_size)`` of that order, featurized when
    it is asked for and padded to its longest row. A batch depends only on
    ``(seed, epoch, i)``, so ``iter_batches(epoch, start)`` is the tail of the full epoch
    and a resumed run sees the same batches (the order and iteration are
    :class:`~ptm_core.data.batches.EpochBatches`, shared with pre-training). Only the rows
    of one batch are ever tokenized at a time.

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
        group_by_length: with ``shuffle``, batch rows of similar length together
            (:mod:`~ptm_core.finetune.data.length_groups`, transformers'
            ``group_by_length``): each epoch's random order is cut into groups of 50
            batches, each sorted by length.
        prefetch: without worker processes, featurize the next batches on a background
            thread (:mod:`ptm_core.data.prefetch`) while the current one trains.
    """

    empty_message = "no rows to batch: the task file gave no examples"

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
        group_by_length: bool = False,
        prefetch: bool = True,
    ) -> None:
        super().__init__(
            rows,
            batch_size,
            seed=seed,
            shuffle=shuffle,
            drop_last=drop_last,
            num_workers=num_workers,
        )
        self.featurizer = featurizer
        self.feature_index = feature_index
        self.prefetch = prefetch
        self.length_groups = (
            LengthGroupedOrder(rows, batch_size) if group_by_length and shuffle else None
        )

    @property
    def rows(self) -> Sequence[Any]:
        """The rows batched (the examples, or QA windows)."""
        return self.examples

    def indices(self, epoch: int, index: int, order: EpochOrder | None = None) -> list[int]:
        """Row indices of batch ``index`` of ``epoch`` (grouped by length when asked)."""
        if self.length_groups is None:
            return super().indices(epoch, index, order)
        order = order if order is not None else self.order(epoch)
        return self.length_groups.indices(order, epoch, index)

    def iter_indices(self, epoch: int, indices: Iterable[int]) -> Iterator[Batch]:
        """Yield batches ``indices`` of ``epoch`` in order: in worker processes with
        ``num_workers``, else built one or two ahead on a thread when ``prefetch``."""
        indices = list(indices)
        if self.num_workers or not self.prefetch or len(indices) < 2:
            yield from super().iter_indices(epoch, indices)
            return
        order = self.order(epoch)
        yield from iter_prefetched(lambda index: self.batch(epoch, index, order), indices)

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        """Build batch ``index`` of ``epoch``."""
        chosen = self.indices(epoch, index, order)
        batch = self.featurizer.featurize([self.rows[i] for i in chosen])
        if self.feature_index:
            batch["feature_index"] = torch.tensor(chosen, dtype=torch.long)
        return batch


__all__ = ["TaskBatches"]
