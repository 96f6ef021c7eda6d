"""Stop a run at its first non-finite loss, before anything trained on it is saved.

A NaN or inf loss (NaN weights, a NaN input feature, a learning rate that diverges) makes
every later step NaN: the run would finish, print ``loss nan`` and write a ``final/`` of
NaN weights. :class:`FiniteLossGuard` remembers the first optimizer step whose loss is not
finite and which loss terms were (an objective mix logs each part as ``<name>/loss``);
the trainer asks it before every log line, every checkpoint and the end of training.

On the CPU the check is immediate (reading a scalar costs nothing there). On an accelerator
the first bad step is recorded on the device with ``torch.where`` and read only at those
points, so the training loop never waits on the device.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from ptm_core.training.distributed import mean_across_ranks


class NonFiniteLossError(ValueError):
    """Training met a NaN or inf loss; nothing from that step on was saved.

    A ``ValueError``, so the ``ptm`` command prints it as one line and exits 1.
    """


def _loss_terms(metrics: Mapping[str, float | Tensor]) -> dict[str, Tensor]:
    return {
        name: value.detach().float().reshape(())
        for name, value in metrics.items()
        if isinstance(value, Tensor) and value.numel() == 1 and name.split("/")[-1] == "loss"
    }


class FiniteLossGuard:
    """Records the first step with a non-finite loss and raises :class:`NonFiniteLossError`.

    Args:
        immediate: check each loss as it is observed (CPU, single process); otherwise the
            check waits for :meth:`check`.
    """

    def __init__(self, immediate: bool) -> None:
        self.immediate = immediate
        self._first_step: Tensor | None = None  # 0-d long, -1 while every loss is finite
        self._bad_terms: dict[str, Tensor] = {}  # 0-d bool per loss term, at the first bad step
        self._loss_bad: Tensor | None = None

    def observe(self, step: int, loss: Tensor, metrics: Mapping[str, float | Tensor]) -> None:
        """Note the loss (and the loss terms among ``metrics``) of one micro-batch of ``step``."""
        loss = loss.detach().float().reshape(())
        terms = _loss_terms(metrics)
        if self.immediate:
            if not bool(torch.isfinite(loss)):
                bad = [name for name, value in terms.items() if not bool(torch.isfinite(value))]
                raise self._error(step, bad)
            return
        bad_now = ~torch.isfinite(loss)
        if self._first_step is None:
            self._first_step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._loss_bad = torch.zeros((), dtype=torch.bool, device=loss.device)
        new = bad_now & (self._first_step < 0)
        self._first_step = torch.where(
            new, torch.full_like(self._first_step, step), self._first_step
        )
        for name, value in terms.items():
            previous = self._bad_terms.get(name, torch.zeros_like(new))
            self._bad_terms[name] = torch.where(new, ~torch.isfinite(value), previous)

    def check(self) -> None:
        """Raise :class:`NonFiniteLossError` if any loss observed so far was not finite.

        Under DDP every rank must call it at the same points: the flag is reduced across
        ranks, so all of them stop together.
        """
        if self._first_step is None:
            return
        first = self._first_step.float()
        # Any rank's bad step stops every rank (a rank that stopped alone would hang the rest).
        flagged = mean_across_ranks((first >= 0).float().reshape(1))
        if float(flagged) <= 0:
            return
        step = int(first)
        bad = [name for name, value in self._bad_terms.items() if bool(value)]
        raise self._error(step, bad)

    @staticmethod
    def _error(step: int, bad_terms: list[str]) -> NonFiniteLossError:
        where = f"at step {step}" if step >= 0 else "on another rank"
        which = (
            f"the loss term(s) {', '.join(sorted(bad_terms))}" if bad_terms else "the total loss"
        )
        return NonFiniteLossError(
            f"training stopped: {which} became NaN or inf {where}; nothing from that step on "
            "was saved (no final/). Check the inputs and the weights it starts from, or lower "
            "the learning rate"
        )
