"""Head importance checked against exhaustive single-head ablation (Michel et al., 2019).

Michel et al. score head ``h`` by ``I_h = E_x |dL(x) / d xi_h|``, the first-order estimate of
what gating the head off (``xi_h: 1 -> 0``) does to the loss
(:func:`ptm_core.compress.prune.head_importance`). The exhaustive check gates each head to 0
alone (:func:`~ptm_core.compress.prune.head_mask`), runs the whole dev set, and measures the
loss change; the Spearman rank correlation of the two orders says how far the gradient
ranking can be trusted on this model.

The importance file written by ``ptm analyze MODEL heads`` (``heads.json``) is read back by
``ptm compress --method prune-heads --importance heads.json``
(:func:`read_head_importance`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from ptm_core.compress.prune import (
    LossFn,
    attention_modules,
    encoder_of,
    head_importance,
    head_mask,
    task_loss_fn,
)
from ptm_core.progress import track

#: The key of ``heads.json`` that ``ptm compress --importance`` reads.
IMPORTANCE_KEY = "importance"


@dataclass
class HeadAblation:
    """Single-head ablation and gradient importance of every head.

    Attributes:
        base_loss: mean dev loss with every head on.
        loss_increase: ``(layers, heads)`` mean loss with only that head gated off, minus
            ``base_loss``.
        abs_change: ``(layers, heads)`` mean over batches of ``|loss change|`` (the ablation
            counterpart of Michel et al.'s expectation of an absolute value).
        importance: ``(layers, heads)`` Michel et al.'s importance, not normalised.
        normalized: ``(layers, heads)`` the importance normalised per layer (l2), the score
            ``ptm compress --method prune-heads`` ranks by.
        spearman: rank correlation of ``importance`` and ``loss_increase`` over all heads.
        spearman_abs: rank correlation of ``importance`` and ``abs_change``.
        batches: dev batches used.
    """

    base_loss: float
    loss_increase: Tensor
    abs_change: Tensor
    importance: Tensor
    normalized: Tensor
    spearman: float
    spearman_abs: float
    batches: int


def spearman(first: Tensor, second: Tensor) -> float:
    """Spearman rank correlation of two equally shaped tensors (flattened; ties averaged)."""
    from scipy.stats import spearmanr

    a, b = first.flatten().double().numpy(), second.flatten().double().numpy()
    if a.size < 2:
        raise ValueError("a rank correlation needs at least 2 heads")
    return float(spearmanr(a, b).statistic)


@torch.no_grad()
def _losses(model: nn.Module, batches: Sequence[dict[str, Tensor]], loss_fn: LossFn) -> Tensor:
    return torch.tensor([float(loss_fn(model, batch)) for batch in batches], dtype=torch.float64)


def ablate_heads(
    model: nn.Module,
    batches: Iterable[dict[str, Tensor]],
    loss_fn: LossFn = task_loss_fn,
) -> HeadAblation:
    """Gradient importance and exhaustive single-head ablation on the same batches.

    Args:
        model: a :class:`~ptm_core.finetune.model.TaskModel` or encoder (with ``loss_fn``).
        batches: labelled dev batches; read into memory once (the ablation runs them
            ``heads + 1`` times).
        loss_fn: ``(model, batch) -> loss``; default the task model's loss.

    Raises:
        ValueError: no batch, or an encoder whose heads cannot be gated (ALBERT's shared
            layers, relative positions; the message says which).
    """
    data = list(batches)
    if not data:
        raise ValueError("head ablation needs at least one batch of labelled dev data")
    encoder = encoder_of(model)
    counts = [m.num_heads for m in attention_modules(encoder)]
    if len(set(counts)) != 1:
        raise ValueError(f"heads per layer differ ({counts}): a pruned model; analyse its source")
    was_training = model.training
    model.eval()
    try:
        raw = torch.stack(head_importance(model, data, loss_fn, normalize_layers=False))
        base = _losses(model, data, loss_fn)
        increase = torch.zeros(len(counts), counts[0], dtype=torch.float64)
        abs_change = torch.zeros_like(increase)
        cells = [(layer, head) for layer in range(len(counts)) for head in range(counts[0])]
        for layer, head in track(cells, "ablate heads", len(cells), "head"):
            gates = [torch.ones(n) for n in counts]
            gates[layer][head] = 0.0
            with head_mask(encoder, gates):
                losses = _losses(model, data, loss_fn)
            increase[layer, head] = (losses - base).mean()
            abs_change[layer, head] = (losses - base).abs().mean()
    finally:
        model.train(was_training)
    normalized = raw / raw.norm(dim=1, keepdim=True).clamp(min=1e-20)
    return HeadAblation(
        base_loss=float(base.mean()),
        loss_increase=increase,
        abs_change=abs_change,
        importance=raw,
        normalized=normalized,
        spearman=spearman(raw, increase),
        spearman_abs=spearman(raw, abs_change),
        batches=len(data),
    )


def read_head_importance(path: str | Path, heads_per_layer: Sequence[int]) -> list[Tensor]:
    """The per-layer head importance saved in ``path`` (``heads.json`` of ``ptm analyze
    heads``, or a ``compression.json`` of an earlier prune), checked against the model.

    Args:
        path: the JSON file, whose ``importance`` is a list of per-layer score lists.
        heads_per_layer: the heads of each layer of the model it will prune.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not JSON, no ``importance`` list, or its shape does not match the model
            (the message names the file and the fix).
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"{file}: no such file; pass the heads.json that `ptm analyze MODEL heads` wrote"
        )
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{file}: not JSON ({exc.msg}, line {exc.lineno})") from None
    table = record.get(IMPORTANCE_KEY) if isinstance(record, dict) else None
    ok = isinstance(table, list) and all(
        isinstance(row, list) and all(isinstance(v, int | float) for v in row) for row in table
    )
    if not ok:
        raise ValueError(
            f"{file}: no '{IMPORTANCE_KEY}' list of per-layer score lists; pass the heads.json "
            "that `ptm analyze MODEL heads` wrote"
        )
    shape = [len(row) for row in table]  # type: ignore[union-attr]
    if shape != list(heads_per_layer):
        raise ValueError(
            f"{file}: '{IMPORTANCE_KEY}' has heads per layer {shape}, the model "
            f"{list(heads_per_layer)}; the scores belong to another model: rerun "
            "`ptm analyze MODEL heads` on this one"
        )
    return [torch.tensor(row, dtype=torch.float32) for row in table]  # type: ignore[union-attr]
