"""The task model the knowledge-fused encoders share: an encoder, a core head, a mention pool.

ERNIE-THU (:class:`~ptm_knowledge.ernie.task_model.ErnieTaskModel`) and KnowBERT
(:class:`~ptm_knowledge.knowbert.finetune.KnowBertTaskModel`) fine-tune the same way: a
core sequence-level head (``build_task_head``) reads one vector per row, the mean of the
final states over the pieces of the row's entity mentions (``pool="mentions"``, the [CLS]
state for a row without one) or the [CLS] state (``pool="first"``). Each family keeps its
own ``forward`` (which encoder call, which positions are mentions) and its ablation switch;
the checks, the pooling, the loss and the ``task.json`` record are here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from ptm_core.finetune.model import (
    TaskOutput,
    build_task_head,
    check_labels,
    head_settings,
    task_loss,
)

POOLS = ("mentions", "first")


class MentionPooledTaskModel(nn.Module):
    """An encoder with a core ``classification``/``regression`` head over a mention pool.

    Subclasses set :attr:`family` (the name errors use), :attr:`task_hint` (the task to
    pick instead) and :attr:`recipe` (``task.json``'s ``recipe``), and write ``forward``
    with :meth:`pool_states` and :meth:`score`.

    Args:
        encoder: the pre-trained encoder (its ``text_config`` sizes the head).
        head: a core ``classification``/``regression`` head (``build_task_head``).
        kind: ``classification`` or ``regression``.
        num_labels: classes (1 for regression).
        label_names: class names in index order.
        pool: ``"mentions"`` or ``"first"``.

    Raises:
        ValueError: another task kind (names the task to use), an unknown pool (lists
            the valid ones), a ``num_labels`` that does not fit ``kind``, or
            ``label_names`` of another length.
    """

    family: ClassVar[str]
    task_hint: ClassVar[str]
    recipe: ClassVar[str]

    def __init__(
        self,
        encoder: nn.Module,
        head: nn.Module,
        kind: str,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        pool: str = "mentions",
    ) -> None:
        super().__init__()
        if kind not in ("classification", "regression"):
            raise ValueError(
                f"{self.family} fine-tuning supports classification and regression, not "
                f"{kind!r}; use a GLUE-style task ({self.task_hint})"
            )
        if pool not in POOLS:
            raise ValueError(f"unknown pool {pool!r}; valid: {', '.join(POOLS)}")
        check_labels(kind, num_labels, label_names)
        self.encoder = encoder
        self.head = head
        self.kind = kind
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.pool = pool

    def pool_states(self, states: Tensor, mentions: Tensor | None) -> Tensor:
        """``(B, L, D)`` final states -> ``(B, D)``: the mean over ``mentions`` ``(B, L)``
        (True at a mention's piece) with ``pool="mentions"``, else (or for a row without a
        mention, or with no ``mentions`` at all) the [CLS] state."""
        pooled = states[:, 0]  # (B, D)
        if self.pool == "mentions" and mentions is not None:
            at = mentions.to(states.dtype)  # (B, L)
            count = at.sum(1, keepdim=True)  # (B, 1)
            mean = (states * at[..., None]).sum(1) / count.clamp(min=1)
            pooled = torch.where(count > 0, mean, pooled)
        return pooled

    def score(self, pooled: Tensor, batch: dict[str, Tensor]) -> TaskOutput:
        """The head on ``pooled`` ``(B, D)``, and the task loss when ``batch`` has labels."""
        logits = self.head(pooled[:, None, :])  # (B, N)
        loss, metrics = task_loss(self.kind, logits, batch)
        return TaskOutput(loss=loss, logits=logits, metrics=metrics)

    def record(self, ablation: dict[str, Any]) -> dict[str, Any]:
        """``task.json``'s model entries, with the family's ablation switch ``ablation``."""
        return {
            "recipe": self.recipe,
            "kind": self.kind,
            "num_labels": self.num_labels,
            "label_names": self.label_names,
            **head_settings(self.head),
            **ablation,
            "entity_pool": self.pool,
        }


def text_task_head(encoder: Any, kind: str, num_labels: int, dropout: float) -> nn.Module:
    """A fresh core head for ``kind``, sized and initialised from ``encoder.text_config``."""
    config = encoder.text_config
    return build_task_head(
        config.hidden_size, kind, num_labels, dropout, initializer_range=config.initializer_range
    )


__all__ = ["POOLS", "MentionPooledTaskModel", "text_task_head"]
