"""CogQA's two training phases on the core Trainer: settings, per-module learning rates.

Each phase (System 1, then System 2) is one core :class:`~ptm_core.training.Trainer` run in
its own folder (``<output_dir>/system1``, ``<output_dir>/system2``), so both gain what every
family has: the warm-up/linear-decay schedule, ``metrics.jsonl``, checkpoints every
``save_every`` steps and exact resume. The joint phase optimises System 2 and System 1 at two
learning rates (the paper's fine-tuning of the reader is much gentler than the GNN's), which
the core optimiser builder does not offer: :class:`PhaseTrainer` swaps in an AdamW with one
group per module prefix, keeping BERT's no-decay rule for 1-d parameters.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.metrics import MetricsLog
from ptm_core.training.optim import linear_warmup_decay
from ptm_core.training.protocols import BatchSource


@dataclass
class PhaseOutput:
    """What a CogQA training module returns to the Trainer: a scalar loss and metrics."""

    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


def grouped_adamw(
    model: nn.Module, config: TrainerConfig, learning_rates: Mapping[str, float]
) -> torch.optim.AdamW:
    """AdamW whose parameters under ``prefix.`` use ``learning_rates[prefix]`` (others
    ``config.learning_rate``); matrices decay by ``config.weight_decay``, 1-d tensors not."""
    groups: dict[tuple[float, bool], list[nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        lr = next(
            (rate for prefix, rate in learning_rates.items() if name.startswith(f"{prefix}.")),
            config.learning_rate,
        )
        groups.setdefault((lr, param.ndim >= 2), []).append(param)
    return torch.optim.AdamW(
        [
            {"params": params, "lr": lr, "weight_decay": config.weight_decay if decay else 0.0}
            for (lr, decay), params in groups.items()
        ],
        lr=config.learning_rate,
        betas=config.adam_betas,
        eps=config.adam_eps,
    )


class PhaseTrainer(Trainer):
    """The core Trainer with one learning rate per submodule (``learning_rates``).

    Args:
        model, data, config, callbacks: as :class:`~ptm_core.training.Trainer`.
        learning_rates: ``{submodule prefix: peak rate}``; empty keeps the core optimiser.
    """

    def __init__(
        self,
        model: nn.Module,
        data: BatchSource,
        config: TrainerConfig,
        *,
        learning_rates: Mapping[str, float] | None = None,
        callbacks: Iterable[object] = (),
    ) -> None:
        super().__init__(model, data, config, callbacks=callbacks)
        if learning_rates:
            self.optimizer = grouped_adamw(self.model, config, learning_rates)
            self.scheduler = linear_warmup_decay(
                self.optimizer, config.num_warmup_steps, config.max_steps
            )


def phase_config(
    output_dir: Path,
    *,
    epochs: int,
    batches_per_epoch: int,
    accumulation_steps: int,
    learning_rate: float,
    max_grad_norm: float | None,
    warmup_ratio: float,
    save_every: int,
    seed: int,
    resume: bool,
) -> TrainerConfig:
    """Trainer settings of one phase: ``epochs`` passes of ``accumulation_steps``
    micro-batches per step (``max_steps = epochs * ceil(batches / accumulation)``), AdamW
    as the original loops had it (weight decay 0.01, eps 1e-8), fp32 on the CPU (graph
    growth and inference run there), a metrics line every step."""
    return TrainerConfig(
        output_dir=str(output_dir),
        max_steps=epochs * math.ceil(batches_per_epoch / accumulation_steps),
        learning_rate=learning_rate,
        weight_decay=0.01,
        adam_eps=1e-8,
        warmup_ratio=warmup_ratio,
        gradient_accumulation_steps=accumulation_steps,
        max_grad_norm=max_grad_norm,
        precision="fp32",
        device="cpu",
        seed=seed,
        log_every=1,
        save_every=save_every,
        resume=resume,
        progress=False,
    )


def fit_phase(
    model: nn.Module,
    data: BatchSource,
    config: TrainerConfig,
    *,
    learning_rates: Mapping[str, float] | None = None,
    callbacks: Iterable[object] = (),
) -> list[float]:
    """Run (or resume, or find finished) one phase; returns the loss of every step so far,
    read back from its ``metrics.jsonl`` so a resumed run reports the whole curve."""
    result = PhaseTrainer(
        model, data, config, learning_rates=learning_rates, callbacks=callbacks
    ).fit()
    return [float(record["loss"]) for record in MetricsLog(result.metrics_path).read()]
