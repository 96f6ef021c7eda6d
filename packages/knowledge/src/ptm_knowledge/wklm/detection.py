"""WKLM's entity-level replacement detection, and its MLM that leaves mentions alone.

Xiong et al. (2020), section 2.2: for each entity mention the model predicts whether it is
the original entity or a same-type replacement, a logistic loss per mention; MLM is kept
at a reduced masking rate (5% instead of 15%) and summed with it.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput
from ptm_core.objectives.mlm import MaskedLMObjective, MaskingMode
from ptm_core.tokenization import VocabInfo

Boundary = Literal["mention", "outside"]


class ReplacementDetectionHead(nn.Module):
    """A mention's boundary states -> one logit: ``w^T [h_first; h_last] + b``.

    ``sigmoid(logit)`` is the probability that the mention was replaced. Returns logits
    only; the objective computes the loss.

    Args:
        hidden_size: encoder width ``D``.

    Shapes:
        ``first, last: (N, D) -> (N,)``.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.classifier = nn.Linear(2 * hidden_size, 1)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, first: Tensor, last: Tensor) -> Tensor:
        return self.classifier(torch.cat([first, last], dim=-1)).squeeze(-1)


def boundary_positions(
    labels: Tensor, ends: Tensor, boundary: Boundary = "mention"
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Rows, boundary positions and labels of the labelled mentions of a batch.

    Args:
        labels: ``(B, L)`` 0/1 on each mention's first piece, ``-100`` elsewhere.
        ends: ``(B, L)`` the mention's last piece on its first piece.
        boundary: ``"mention"``: the mention's first and last pieces; ``"outside"``: the
            pieces just before and after it.

    Returns:
        ``(rows, firsts, lasts, targets)``, each ``(N,)``.
    """
    rows, starts = (labels != IGNORE_INDEX).nonzero(as_tuple=True)
    lasts = ends[rows, starts]
    targets = labels[rows, starts]
    if boundary == "outside":
        return rows, starts - 1, lasts + 1, targets
    return rows, starts, lasts, targets


class EntityReplacementObjective(Objective):
    """WKLM's replaced-entity detection (Xiong et al., 2020): mean BCE over mentions.

    The data side (type-constrained replacement) changes the rows' length, so it runs on
    the rows before batching (:class:`~ptm_knowledge.wklm.EntityReplacementRows`); the
    batch brings ``mention_labels`` and ``mention_ends`` ``(B, L)``. Which tokens
    represent a mention: the paper predicts from "the final representations of the
    boundary words" of the mention, concatenated, through a logistic layer. Two readings
    are offered: ``boundary="mention"`` (default) takes the first and last word pieces of
    the mention itself, whose states hold the (possibly replaced) name directly and
    exist for every mention, also a one-piece mention at a row's edge; ``"outside"``
    takes the pieces just before and after it (``[CLS]``/``[SEP]`` at the row's ends),
    the words around the span, which judge the name only through attention.

    Args:
        hidden_size: width of the states the head reads.
        vocab: unused (objectives are built with ``vocab=`` and numbers).
        boundary: ``"mention"`` or ``"outside"``.

    Metrics: ``accuracy`` (logit > 0 vs label), ``mentions`` (labelled mentions) and
    ``replaced`` (their share that was replaced).
    """

    name = "detection"
    batch_keys = ("mention_labels", "mention_ends")

    def __init__(
        self,
        vocab: VocabInfo | None = None,
        *,
        hidden_size: int,
        boundary: Boundary = "mention",
    ) -> None:
        super().__init__()
        if boundary not in ("mention", "outside"):
            raise ValueError(f"boundary must be 'mention' or 'outside', got {boundary!r}")
        self.boundary: Boundary = boundary
        self.head = ReplacementDetectionHead(hidden_size)

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if "mention_labels" not in batch:
            return batch
        # Padding is 0 (pad_examples' default); only real pieces carry labels.
        padding = batch["attention_mask"] == 0
        return {
            **batch,
            "mention_labels": batch["mention_labels"].masked_fill(padding, IGNORE_INDEX),
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        hidden = encoder_output.last_hidden_state  # (B, L, D)
        rows, firsts, lasts, targets = boundary_positions(
            batch["mention_labels"], batch["mention_ends"], self.boundary
        )
        if rows.numel() == 0:
            # No mention in the batch: a zero that keeps the graph; no accuracy is logged
            # (the trainer averages each metric over the steps that report it).
            zero = self.head.classifier.weight.sum() * 0.0
            return ObjectiveOutput(loss=zero, metrics={"mentions": zero.detach()})
        logits = self.head(hidden[rows, firsts], hidden[rows, lasts])  # (N,)
        labels = targets.float()
        loss = F.binary_cross_entropy_with_logits(logits.float(), labels)
        correct = ((logits > 0).float() == labels).float().mean()
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": correct.detach(),
                "mentions": torch.tensor(float(labels.numel()), device=labels.device),
                "replaced": labels.mean().detach(),
            },
        )


class OutsideMentionsMLMObjective(MaskedLMObjective):
    """MLM at WKLM's reduced rate (5%), choosing only pieces outside entity mentions.

    The mention pieces carry the detection task (a replaced name is the thing to
    judge); masking them would hide the evidence or the replacement, so they are never
    chosen (``mention_mask`` marks them; BERT's 80/10/10 rule otherwise).

    Args:
        vocab, hidden_size, vocab_size, tie_to, ...: as :class:`~ptm_core.objectives.MaskedLMObjective`.
        mask_prob: share of candidate pieces chosen (default 0.05).
        exclude_mentions: keep mention pieces out of the candidates.
        (others as :class:`~ptm_core.objectives.MaskedLMObjective`)
    """

    name = "mlm"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        mask_prob: float = 0.05,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        mode: MaskingMode = "dynamic",
        exclude_mentions: bool = True,
    ) -> None:
        if mode != "dynamic":
            raise ValueError("WKLM's MLM masks the batch after replacement: mode must be 'dynamic'")
        super().__init__(
            vocab,
            hidden_size=hidden_size,
            vocab_size=vocab_size,
            tie_to=tie_to,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            mask_prob=mask_prob,
            mask_token_prob=mask_token_prob,
            random_token_prob=random_token_prob,
            mode=mode,
        )
        self.exclude_mentions = exclude_mentions

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        excluded = batch["special_tokens_mask"].bool()
        if self.exclude_mentions and "mention_mask" in batch:
            excluded = excluded | batch["mention_mask"].bool()
        ids, labels = self.corrupt(batch["input_ids"], excluded, generator)
        return {**batch, "input_ids": ids, "mlm_labels": labels}


__all__ = [
    "EntityReplacementObjective",
    "OutsideMentionsMLMObjective",
    "ReplacementDetectionHead",
    "boundary_positions",
]
