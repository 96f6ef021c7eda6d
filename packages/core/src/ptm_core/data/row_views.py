"""Lazy views over a sequence of examples: the static data side and packing, per index.

Both keep the rows they wrap unbuilt until an index is asked for, so a layout over a
memory-mapped corpus stays a few arrays, whatever the corpus size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ptm_core.data.layouts import LazyRows, plan_packing
from ptm_core.data.packing import pack_examples
from ptm_core.seeding import generator_for

Example = dict[str, Any]
StaticStep = Callable[[Example, torch.Generator], Example]


class StaticDataSide(LazyRows):
    """Rows with the objectives' static data side applied when indexed (static masking).

    Row ``i`` is corrupted with a generator seeded by ``(seed, "static", i)``, so it is the
    same in every epoch, every worker process and every resume, whatever order rows are
    read in (the static masks of BERT's ``create_pretraining_data.py`` with dupe factor 1).

    Args:
        rows: the uncorrupted rows.
        step: the data side (``ObjectiveMix.prepare_example``).
        seed: base seed.
    """

    def __init__(self, rows: Sequence[Example], step: StaticStep, seed: int) -> None:
        self.rows = rows
        self.step = step
        self.seed = seed

    def __len__(self) -> int:
        return len(self.rows)

    def _build(self, index: int) -> Example:
        return self.step(self.rows[index], generator_for(self.seed, "static", index))

    def lengths(self) -> np.ndarray:
        """Row lengths (the static data side keeps them), from the rows' plan."""
        return row_lengths(self.rows)


class PackedRows(LazyRows):
    """Consecutive rows packed into rows of at most ``max_length`` tokens (see
    :func:`~ptm_core.data.packing.pack_examples`), planned from row lengths alone.

    Args:
        rows: single-segment rows (they must fit ``max_length`` each).
        max_length: packed row length.
    """

    def __init__(self, rows: Sequence[Example], max_length: int) -> None:
        self.rows = rows
        self.max_length = max_length
        self.bounds = plan_packing(row_lengths(rows), max_length)

    def __len__(self) -> int:
        return max(len(self.bounds) - 1, 0)

    def _build(self, index: int) -> Example:
        start, stop = int(self.bounds[index]), int(self.bounds[index + 1])
        (row,) = pack_examples([self.rows[i] for i in range(start, stop)], self.max_length)
        return row


def row_lengths(rows: Sequence[Example]) -> np.ndarray:
    """``(N,)`` lengths of ``rows``: from their plan when they have one, else by building them."""
    lengths = getattr(rows, "lengths", None)
    if callable(lengths):
        return np.asarray(lengths(), dtype=np.int64)
    return np.asarray([len(row["input_ids"]) for row in rows], dtype=np.int64)
