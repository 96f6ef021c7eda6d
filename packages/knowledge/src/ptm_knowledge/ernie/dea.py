"""ERNIE-THU's denoising entity auto-encoder (dEA)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.modules import get_activation
from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch, accuracy
from ptm_core.tokenization import VocabInfo
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

NO_ENTITY = -1


def corrupt_entities(
    entity_ids: Tensor,
    num_entities: int,
    generator: torch.Generator,
    *,
    replace_prob: float = 0.05,
    drop_prob: float = 0.15,
) -> tuple[Tensor, Tensor]:
    """dEA input noise: of the aligned tokens, ``replace_prob`` get a random entity,
    ``drop_prob`` lose their entity (``-1``) and the rest keep it (5/15/80, ERNIE).

    Args:
        entity_ids: ``(B, L)`` entity indices, ``-1`` = none.
        num_entities: size of the entity table (random entities are uniform over it).
        generator: seeded randomness.

    Returns:
        ``(corrupted, decision)``: corrupted ``(B, L)`` ids and ``(B, L)`` long decision
        codes: 0 kept, 1 replaced, 2 dropped, -1 not aligned.
    """
    aligned = entity_ids >= 0
    draw = torch.rand(entity_ids.shape, generator=generator)
    replaced = aligned & (draw < replace_prob)
    dropped = aligned & (draw >= replace_prob) & (draw < replace_prob + drop_prob)
    random_ids = torch.randint(num_entities, entity_ids.shape, generator=generator)
    corrupted = torch.where(replaced, random_ids, entity_ids).masked_fill(dropped, NO_ENTITY)
    decision = torch.full_like(entity_ids, -1)
    decision[aligned] = 0
    decision[replaced] = 1
    decision[dropped] = 2
    return corrupted, decision


class EntityPredictionHead(nn.Module):
    """Token state -> entity space: ``LN(act(W h + b))``, width of the entity table."""

    def __init__(
        self, hidden_size: int, entity_dim: int, activation: str = "gelu", eps: float = 1e-12
    ):
        super().__init__()
        self.dense = nn.Linear(hidden_size, entity_dim)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(entity_dim, eps=eps)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.norm(self.activation(self.dense(hidden)))


class DenoisingEntityAutoencoderObjective(Objective):
    """dEA (Zhang et al., 2019): recover each aligned token's entity from its token state.

    Data side (:meth:`collate`): :func:`corrupt_entities` on ``entity_ids`` (5 % random
    entity, 15 % dropped, 80 % kept); the original ids become ``dea_labels``. Loss side:
    for every aligned token, ``p(e | w) = softmax_e(head(w) . E_e)`` over the entities
    present in the batch (``E`` = the frozen KG table), cross-entropy against the
    aligned entity. Chance accuracy is ``1 / candidates`` (logged), and ``mentions``
    (aligned tokens in the batch) is logged at every step: ``dea/mentions 0`` means the
    step's ``dea/loss 0.0`` taught nothing.

    Args:
        encoder: the :class:`KnowledgeableEncoder` (for widths and the entity table).
        vocab: unused (objective factory signature).
        replace_prob, drop_prob: the 5 % / 15 % rates.
        activation, layer_norm_eps: the head transform's (the text encoder's).

    Batch keys: reads and rewrites ``entity_ids`` ``(B, L)``; writes ``dea_labels`` and
    ``dea_corrupted`` ``(B, L)`` (True where the input entity was replaced or dropped).
    """

    name = "dea"
    batch_keys = ("dea_labels", "dea_corrupted")

    def __init__(
        self,
        encoder: KnowledgeableEncoder,
        vocab: VocabInfo | None = None,
        *,
        replace_prob: float = 0.05,
        drop_prob: float = 0.15,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if not isinstance(encoder, KnowledgeableEncoder):
            raise TypeError("the dEA objective needs a KnowledgeableEncoder (ERNIE-THU model)")
        if replace_prob < 0 or drop_prob < 0 or replace_prob + drop_prob > 1:
            raise ValueError("replace_prob and drop_prob must be >= 0 and sum to at most 1")
        self.replace_prob = replace_prob
        self.drop_prob = drop_prob
        self.num_entities = encoder.num_entities
        self._encoder = [encoder]  # a reference, not a sub-module (no duplicate weights)
        self.head = EntityPredictionHead(
            encoder.hidden_size,
            encoder.entity_table.shape[1],
            activation,
            layer_norm_eps,
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        ids = batch["entity_ids"]
        if "attention_mask" in batch:  # the core collator pads unknown keys with 0
            ids = ids.masked_fill(~batch["attention_mask"].bool(), NO_ENTITY)
        corrupted, decision = corrupt_entities(
            ids,
            self.num_entities,
            generator,
            replace_prob=self.replace_prob,
            drop_prob=self.drop_prob,
        )
        return {
            **batch,
            "entity_ids": corrupted,
            "dea_labels": ids,
            "dea_corrupted": decision > 0,
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["dea_labels"]
        aligned = labels >= 0
        # ``mentions`` is logged at every step so that a batch without aligned tokens (a
        # zero loss that teaches nothing) is visible as ``dea/mentions 0``, not mistaken
        # for learning. Every branch writes the same keys: under DDP each rank reduces
        # the same metric names in the same order.
        mentions = aligned.sum().float().detach()
        corrupted = batch.get("dea_corrupted")
        noisy = aligned & corrupted.bool() if corrupted is not None else torch.zeros_like(aligned)
        if not aligned.any():
            zero = encoder_output.last_hidden_state.sum() * 0.0
            nothing = zero.detach()
            return ObjectiveOutput(
                loss=zero,
                metrics={
                    "accuracy": nothing,
                    "corrupted_accuracy": nothing,
                    "corrupted": nothing,
                    "candidates": nothing,
                    "chance": nothing,
                    "mentions": mentions,
                },
            )
        candidates, targets = torch.unique(labels[aligned], return_inverse=True)
        table = self._encoder[0].entity_table[candidates]  # (C, k), frozen
        predicted = self.head(encoder_output.last_hidden_state[aligned])  # (N, k)
        logits = predicted.float() @ table.float().T  # (N, C)
        on_noisy = noisy[aligned]  # (N,)
        return ObjectiveOutput(
            loss=F.cross_entropy(logits, targets),
            metrics={
                "accuracy": accuracy(logits, targets),
                "corrupted_accuracy": accuracy(logits[on_noisy], targets[on_noisy]),
                "corrupted": on_noisy.sum().float().detach(),
                "candidates": torch.tensor(float(len(candidates)), device=logits.device),
                "chance": torch.tensor(1.0 / len(candidates), device=logits.device),
                "mentions": mentions,
            },
        )
