"""ERNIE-THU fine-tuning, model side: the knowledgeable encoder and a core task head.

:class:`ErnieTaskModel` is the pre-trained
:class:`~ptm_knowledge.ernie.thu_encoder.KnowledgeableEncoder` + a core task head;
``use_entities=False`` is the kg-free ablation (the same model, no entity embedding is
fused anywhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

import torch
from torch import Tensor, nn

from ptm_core.finetune.model import TaskOutput
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.linking.alignment import NO_ENTITY
from ptm_knowledge.mention_task_model import POOLS, MentionPooledTaskModel, text_task_head

RECIPE = "ernie_thu_finetune"
Pool = Literal["mentions", "first"]


class ErnieTaskModel(MentionPooledTaskModel):
    """ERNIE-THU with a core sequence-level task head (Zhang et al., 2019, section 4).

    The head reads one vector per row: with ``pool="mentions"`` the mean of the final
    states at the pieces that carry a linked entity (the [CLS] state for a row without
    one), as ERNIE's entity typing reads its entity marker; with ``pool="first"`` the
    [CLS] state. With one K-Encoder layer, [CLS] attends before entities are fused, so its
    state never sees them: ``"mentions"`` is the default.

    Args:
        encoder: the pre-trained :class:`KnowledgeableEncoder`.
        head: a core ``classification``/``regression`` head (``build_task_head``).
        kind: ``classification`` or ``regression``.
        num_labels: classes (1 for regression).
        label_names: class names in index order.
        use_entities: False is the kg-free ablation: no entity is passed to the encoder,
            so no KG embedding is fused (the pooled positions stay the linked mentions').
        pool: ``"mentions"`` or ``"first"``.

    Inputs (``forward(batch)``): ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``entity_ids`` ``(B, L)``; ``labels`` ``(B,)`` optional.
    """

    family = "ERNIE-THU"
    task_hint = "configs/task/*.yaml with kind: classification"
    recipe = RECIPE
    encoder: KnowledgeableEncoder

    def __init__(
        self,
        encoder: KnowledgeableEncoder,
        head: nn.Module,
        kind: str,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        use_entities: bool = True,
        pool: Pool = "mentions",
    ) -> None:
        super().__init__(encoder, head, kind, num_labels, label_names=label_names, pool=pool)
        self.use_entities = use_entities

    def forward(self, batch: dict[str, Tensor]) -> TaskOutput:
        input_ids = batch["input_ids"]
        entity_ids = batch.get("entity_ids")
        if entity_ids is None:
            entity_ids = torch.full_like(input_ids, NO_ENTITY)
        hidden = self.encoder(
            input_ids=input_ids,
            attention_mask=batch.get("attention_mask"),
            position_ids=batch.get("position_ids"),
            token_type_ids=batch.get("token_type_ids"),
            entity_ids=entity_ids if self.use_entities else None,
        ).last_hidden_state  # (B, L, D)
        return self.score(self.pool_states(hidden, entity_ids >= 0), batch)

    def settings(self) -> dict[str, Any]:
        """What ``task.json`` records about the model (besides the task)."""
        return self.record({"use_entities": self.use_entities})

    def checkpoint_config(self) -> dict[str, Any]:
        """What the trainer's checkpoints record in ``config.json`` beside the weights."""
        return {
            **self.settings(),
            "knowledge": self.encoder.options,
            "encoder": self.encoder.text_config.to_dict(),
        }


def build_ernie_task_model(
    encoder: KnowledgeableEncoder,
    kind: str,
    num_labels: int,
    dropout: float = 0.1,
    *,
    label_names: Sequence[str] | None = None,
    use_entities: bool = True,
    pool: Pool = "mentions",
) -> ErnieTaskModel:
    """Put a fresh core head for ``kind`` on an ERNIE-THU encoder (see :class:`ErnieTaskModel`)."""
    return ErnieTaskModel(
        encoder,
        text_task_head(encoder, kind, num_labels, dropout),  # sized by the T-Encoder
        kind,
        num_labels,
        label_names=label_names,
        use_entities=use_entities,
        pool=pool,
    )


def ernie_model_of_record(encoder: KnowledgeableEncoder, record: dict[str, Any]) -> ErnieTaskModel:
    """A fresh :class:`ErnieTaskModel` with the head ``task.json`` describes."""
    return build_ernie_task_model(
        encoder,
        record["kind"],
        record["num_labels"],
        float(record.get("dropout", 0.1)),
        label_names=record.get("label_names"),
        use_entities=bool(record.get("use_entities", True)),
        pool=cast(Pool, record.get("entity_pool", "mentions")),
    )


__all__ = [
    "POOLS",
    "RECIPE",
    "ErnieTaskModel",
    "Pool",
    "build_ernie_task_model",
    "ernie_model_of_record",
]
