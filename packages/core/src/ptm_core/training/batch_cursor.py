"""A resumable walk over a :class:`BatchSource`: epochs roll over, the position is exact."""

from __future__ import annotations

from collections.abc import Generator, Iterator, Mapping

import torch

from ptm_core.modules.attention_structure import real_tokens
from ptm_core.training.protocols import Batch, BatchSource


def count_tokens(batch: Mapping[str, torch.Tensor]) -> int:
    """Tokens in a batch for throughput: the real tokens of ``attention_mask``, else
    ``input_ids.numel()``.

    A ``[B, L]`` padding mask counts its ones; a ``[B, L, L]`` visibility matrix (GPT,
    UniLM, XLNet, packed rows, K-BERT) counts its diagonal, since every mask builder lets a
    real token see itself and hides padding. An
    :class:`~ptm_core.modules.attention_structure.AttentionStructure` counts its real tokens.
    """
    if "attention_mask" in batch:
        return int(real_tokens(batch["attention_mask"]).sum())
    if "input_ids" in batch:
        return batch["input_ids"].numel()
    return 0


class BatchCursor:
    """Yields batches from ``source`` forever, starting at ``(epoch, index)``.

    :attr:`position` always names the *next* batch to be yielded, so a checkpoint taken
    between two batches restarts exactly there. It is normalised: after the last batch of an
    epoch it reads ``(epoch + 1, 0)``.

    Args:
        source: The batch source.
        epoch: Epoch to start in.
        index: Batch index to start at within that epoch.

    Raises:
        ValueError: If the source is empty.
    """

    def __init__(self, source: BatchSource, epoch: int = 0, index: int = 0) -> None:
        self.source = source
        self.batches_per_epoch = source.batches_per_epoch
        if self.batches_per_epoch < 1:
            raise ValueError(
                f"{type(source).__name__}.batches_per_epoch is {self.batches_per_epoch}; the "
                "data source is empty, check the dataset path and batch size."
            )
        self.position = (epoch, index)
        self._walk = self._generate()

    @property
    def epoch_progress(self) -> float:
        """Epochs completed as a fraction, e.g. ``2.5`` halfway through the third epoch."""
        epoch, index = self.position
        return epoch + index / self.batches_per_epoch

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        return next(self._walk)

    def close(self) -> None:
        """Release the source's current iterator."""
        self._walk.close()

    def _generate(self) -> Generator[Batch, None, None]:
        per_epoch = self.batches_per_epoch
        while True:
            epoch, start = self.position
            index = start
            for index, batch in enumerate(self.source.iter_batches(epoch, start), start + 1):
                self.position = (epoch, index) if index < per_epoch else (epoch + 1, 0)
                yield batch
                if index >= per_epoch:
                    break
            else:
                if index == 0:
                    raise RuntimeError(
                        f"{type(self.source).__name__}.iter_batches(epoch={epoch}) yielded no "
                        "batches; the data source is empty."
                    )
                # The source ran short of batches_per_epoch: trust the iterator and roll over.
                self.position = (epoch + 1, 0)
