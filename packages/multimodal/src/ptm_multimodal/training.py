"""A short in-process pre-training loop (tests, notebooks); runs use ptm_core's Trainer."""

from __future__ import annotations

import torch

from ptm_multimodal.data import ImageTextBatches


def train_steps(
    model: torch.nn.Module,
    data: ImageTextBatches,
    steps: int,
    *,
    learning_rate: float = 1e-3,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
) -> list[float]:
    """Run ``steps`` AdamW steps over ``data`` (epochs in order) and return the losses.

    No checkpoints, no logging: for a full run with resume use
    :class:`ptm_core.training.Trainer` (the ``visualbert``/``vilbert`` recipes do).
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=weight_decay)
    model.train()
    losses: list[float] = []
    epoch = 0
    while len(losses) < steps:
        for batch in data.iter_batches(epoch):
            loss = model(batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            losses.append(float(loss.detach()))
            if len(losses) >= steps:
                break
        epoch += 1
    return losses
