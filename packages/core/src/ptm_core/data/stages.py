"""Pre-training stages run one after another from one batch stream.

ImageBERT (Qi et al., 2020, §4) pre-trains first on a large weakly-supervised set, then
continues on smaller clean sets; :class:`StagedBatches` turns such a schedule (a list of
batch sources, each with its number of batches) into one :class:`BatchSource` for one
training run, so the model, the optimizer and the learning-rate schedule carry over from
stage to stage and a checkpoint resumes inside any stage exactly.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ptm_core.training.protocols import Batch, BatchSource

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stage:
    """One stage of a schedule.

    Attributes:
        name: shown in the log when the stage begins.
        source: the stage's batches (its own data; epochs roll over inside the stage).
        batches: how many batches the stage lasts.
    """

    name: str
    source: BatchSource
    batches: int


class StagedBatches:
    """The batches of ``stages[0]`` for its length, then ``stages[1]``'s, and so on.

    Position ``(epoch, index)`` is global batch ``g = epoch * T + index``, with ``T`` the
    schedule's total length (:attr:`batches_per_epoch`). Batch ``g`` of the schedule is
    batch ``g - start_k`` of stage ``k`` (its epoch and index within the stage's own
    source); past the schedule's end the last stage goes on, so a run longer than the
    schedule keeps training on the last (cleanest) data. Deterministic given
    ``(epoch, index)`` as :class:`BatchSource` requires.

    Args:
        stages: the schedule, in order.

    Raises:
        ValueError: no stage, or a stage of fewer than one batch.
    """

    def __init__(self, stages: Sequence[Stage]) -> None:
        if not stages:
            raise ValueError("a staged schedule needs at least one stage")
        for stage in stages:
            if stage.batches < 1:
                raise ValueError(
                    f"stage {stage.name!r} lasts {stage.batches} batches; give steps >= 1"
                )
        self.stages = tuple(stages)
        self.starts = [0, *itertools.accumulate(s.batches for s in self.stages)][:-1]
        self.total = sum(s.batches for s in self.stages)

    @property
    def batches_per_epoch(self) -> int:
        return self.total

    def locate(self, epoch: int, index: int) -> tuple[int, int, int]:
        """``(stage, epoch in the stage's source, index in that epoch)`` of a position."""
        step = epoch * self.total + index
        stage = min(bisect.bisect_right(self.starts, step) - 1, len(self.stages) - 1)
        local = step - self.starts[stage]
        inner_epoch, inner_index = divmod(local, self.stages[stage].source.batches_per_epoch)
        return stage, inner_epoch, inner_index

    def stage_name(self, epoch: int, index: int) -> str:
        """The name of the stage position ``(epoch, index)`` falls in."""
        return self.stages[self.locate(epoch, index)[0]].name

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        return self.iter_indices(epoch, range(start, self.total))

    def iter_indices(self, epoch: int, indices: Iterable[int]) -> Iterator[Batch]:
        """Yield batches ``indices`` of ``epoch``; consecutive batches of one stage epoch
        are asked of that stage's source in one call (its worker processes stay up)."""
        located = [(index, *self.locate(epoch, index)) for index in indices]
        for (stage, inner_epoch), group in itertools.groupby(located, key=lambda r: r[1:3]):
            run = list(group)
            source = self.stages[stage].source
            first = run[0]
            if epoch * self.total + first[0] == self.starts[stage]:
                logger.info(
                    "pre-training stage %d/%d %r begins at step %d (%d batches)",
                    stage + 1,
                    len(self.stages),
                    self.stages[stage].name,
                    self.starts[stage],
                    self.stages[stage].batches,
                )
            inner = [r[3] for r in run]
            own = getattr(source, "iter_indices", None)
            if callable(own):
                yield from own(inner_epoch, inner)
            elif inner == list(range(inner[0], inner[0] + len(inner))):
                yield from itertools.islice(source.iter_batches(inner_epoch, inner[0]), len(inner))
            else:
                raise TypeError(
                    f"{type(source).__name__} has no iter_indices(); stage {stage} cannot "
                    "skip batches"
                )
