"""Average a pre-training model's own metrics over fixed evaluation batches."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from torch import nn

from ptm_core.progress import track
from ptm_core.training.protocols import BatchSource


@torch.no_grad()
def average_metrics(
    model: nn.Module, batches: BatchSource, *, epoch: int = 0, device: str | torch.device = "cpu"
) -> dict[str, float]:
    """Run ``model`` in eval mode over one epoch of ``batches``; mean of every metric.

    The model is any module whose ``forward(batch)`` returns ``.loss`` and ``.metrics`` (the
    trainer's contract), so every family (MLM+NSP, ERNIE-THU's dEA, ...) is evaluated by
    the same code. ``batches`` must be built with a fixed seed (and ``shuffle=False``) so
    two models (trained and random-init) see identical inputs and corruptions.

    Returns:
        ``{"loss": ..., "<objective>/<metric>": ...}`` averaged over batches.
    """
    model = model.to(device).eval()
    sums: dict[str, float] = defaultdict(float)
    count = 0
    total = batches.batches_per_epoch
    for batch in track(batches.iter_batches(epoch), "evaluate", total, unit="batch"):
        output = model({k: v.to(device) for k, v in batch.items()})
        sums["loss"] += float(output.loss)
        for name, value in output.metrics.items():
            sums[name] += float(value)
        count += 1
    if count == 0:
        raise ValueError("no evaluation batches: the evaluation data is empty")
    return {name: total / count for name, total in sums.items()}


def describe(metrics: dict[str, Any]) -> str:
    """``name=value`` pairs, sorted, for logs."""
    return ", ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items()))
