"""AdamW with BERT's decay rules and the linear warm-up / linear decay schedule."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

from ptm_core.training.config import TrainerConfig

# Device types with a fused AdamW kernel in every torch this project supports (>= 2.6).
FUSED_ADAMW_DEVICES = frozenset({"cpu", "cuda"})


def build_optimizer(model: nn.Module, config: TrainerConfig) -> torch.optim.AdamW:
    """Build AdamW with weight decay on matrices only.

    Biases, norm weights and any other parameter with ``ndim < 2`` get no weight decay
    (Devlin et al., 2019). Tied parameters appear once. Fused AdamW (one kernel per
    parameter group instead of a dozen passes over every tensor: ~5x faster per step on
    BERT-base on CPU, same update up to float rounding) is used when
    ``config.fused_optimizer`` is true, or when it is ``None`` and every parameter is on a
    device type torch has a fused AdamW kernel for (CPU and CUDA included); otherwise
    torch's multi-tensor (``foreach``) implementation runs.

    Args:
        model: The model, already on its training device.
        config: Supplies ``learning_rate``, ``weight_decay``, ``adam_betas``, ``adam_eps``
            and ``fused_optimizer``.

    Returns:
        An AdamW whose first group decays (``ndim >= 2``) and second does not; groups are
        left out when empty.

    Raises:
        ValueError: If the model has no trainable parameter.
    """
    groups: list[dict[str, Any]]
    if config.layer_lr_decay is not None or config.unfreeze_every > 0:
        # Per-depth groups; frozen depths are kept so gradual unfreezing can wake them
        # (AdamW skips a parameter whose grad is None, its weight decay included).
        from ptm_core.training.finetuning import discriminative_param_groups

        groups = discriminative_param_groups(
            model,
            learning_rate=config.learning_rate,
            weight_decay=config.weight_decay,
            layer_decay=config.layer_lr_decay if config.layer_lr_decay is not None else 1.0,
        )
    else:
        decay: list[nn.Parameter] = []
        no_decay: list[nn.Parameter] = []
        seen: set[int] = set()
        for param in model.parameters():  # parameters() already skips repeats of tied weights
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            (decay if param.ndim >= 2 else no_decay).append(param)
        groups = [
            {"params": params, "weight_decay": wd}
            for params, wd in ((decay, config.weight_decay), (no_decay, 0.0))
            if params
        ]
    if not any(group["params"] for group in groups):
        raise ValueError(
            f"{type(model).__name__} has no trainable parameters; unfreeze some "
            "(requires_grad=True) before training."
        )
    fused = config.fused_optimizer
    if fused is None:
        fused = fused_adamw_supported(model)
    return torch.optim.AdamW(
        groups,
        lr=config.learning_rate,
        betas=config.adam_betas,
        eps=config.adam_eps,
        fused=fused or None,  # None lets torch pick foreach; False would force the slow loop
    )


def fused_adamw_supported(model: nn.Module) -> bool:
    """Whether torch has a fused AdamW kernel for every trainable parameter of ``model``.

    True when all trainable parameters are floating point and live on one device type of
    :data:`FUSED_ADAMW_DEVICES`; the Hugging Face ``Trainer`` makes the same choice by
    default on torch >= 2.8 (``optim="adamw_torch_fused"``).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    device_types = {p.device.type for p in params}
    return (
        len(device_types) == 1
        and device_types <= FUSED_ADAMW_DEVICES
        and all(torch.is_floating_point(p) for p in params)
    )


def linear_warmup_decay(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int
) -> LambdaLR:
    """Linear warm-up from 0 to the peak rate, then linear decay to 0 (the BERT schedule).

    The multiplier at scheduler step ``s`` is ``s / warmup_steps`` while ``s <
    warmup_steps``, then ``(total_steps - s) / (total_steps - warmup_steps)``, reaching 0 at
    ``s = total_steps``. Call ``scheduler.step()`` once per optimizer step.

    Args:
        optimizer: The optimizer whose groups' ``lr`` is the peak rate.
        warmup_steps: Warm-up length, ``0 <= warmup_steps <= total_steps``.
        total_steps: Step at which the rate reaches 0, ``>= 1``.

    Returns:
        A ``LambdaLR`` over all parameter groups.

    Raises:
        ValueError: If the step counts are out of range.
    """
    if total_steps < 1:
        raise ValueError(f"total_steps must be >= 1, got {total_steps}.")
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(
            f"warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}."
        )

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return step / warmup_steps
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return LambdaLR(optimizer, multiplier)


def build_schedule(optimizer: torch.optim.Optimizer, config: TrainerConfig) -> LambdaLR:
    """The learning-rate schedule ``config.schedule`` names, over ``config.max_steps``.

    ``"linear"``: :func:`linear_warmup_decay` with ``config.num_warmup_steps``;
    ``"slanted_triangular"``: ULMFiT's STLR with ``stlr_cut_frac`` and ``stlr_ratio``.
    Every parameter group's own rate is scaled (discriminative rates keep their ratios).
    """
    if config.schedule == "slanted_triangular":
        from ptm_core.training.finetuning import slanted_triangular

        return slanted_triangular(
            optimizer, config.max_steps, cut_frac=config.stlr_cut_frac, ratio=config.stlr_ratio
        )
    return linear_warmup_decay(optimizer, config.num_warmup_steps, config.max_steps)
