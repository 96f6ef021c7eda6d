"""KnowBERT's entity linking loss, on the scores every KAR's linker computes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch
from ptm_core.tokenization import VocabInfo
from ptm_knowledge.knowbert.candidates import linking_targets

LOSSES = ("softmax", "margin")


class EntityLinkingObjective(Objective):
    """The linker's supervision (Peters et al., 2019, section 3.2; allenai/kb
    ``EntityLinkingBase``), summed over the KGs that have gold entities.

    ``loss="softmax"`` (the released WordNet and W+W configs): cross-entropy of each span's
    candidate scores against its gold candidate; spans whose gold is the null entity or
    not among the candidates, and spans without supervision, are left out.
    ``loss="margin"``: ``MarginRankingLoss`` on every real candidate slot of the supervised
    spans, target ``+1`` for the gold candidate and ``-1`` for the others (all ``-1`` when
    the span links to nothing), i.e. ``max(0, margin - score)`` / ``max(0, margin + score)``.

    Data side: ``linking_labels`` ``(B, K, S)`` from ``candidate_entities`` and
    ``candidate_gold`` (written by
    :class:`~ptm_knowledge.knowbert.candidates.CandidateTransform`): the gold's candidate
    slot, ``-1`` (links to nothing), ``-100`` (no supervision).

    Args:
        encoder: the KnowBERT encoder (unused; objective factory signature).
        vocab: unused.
        loss: ``softmax`` or ``margin``.
        margin: the margin loss's margin (0.2 in the released code).
    """

    name = "linking"
    batch_keys = ("linking_labels",)

    def __init__(
        self,
        encoder: object = None,
        vocab: VocabInfo | None = None,
        *,
        loss: str = "softmax",
        margin: float = 0.2,
    ) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"unknown linking loss {loss!r}; valid: {', '.join(LOSSES)}")
        self.loss = loss
        self.margin = margin

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if "candidate_entities" not in batch or "candidate_gold" not in batch:
            raise ValueError(
                "the linking objective needs candidate_entities and candidate_gold in the "
                "batch: train it in a KnowBERT run (family knowbert), whose data side adds them"
            )
        labels = linking_targets(batch["candidate_entities"], batch["candidate_gold"])
        return {**batch, "linking_labels": labels}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        scores = getattr(encoder_output, "linking_scores", None)
        if scores is None:
            raise TypeError("the linking objective needs a KnowBertEncoder's output")
        labels = batch["linking_labels"]
        entities = batch["candidate_entities"]
        total = encoder_output.last_hidden_state.sum() * 0.0
        correct = spans = 0.0
        for k, score in enumerate(scores):
            target = labels[:, k]  # (B, S)
            if self.loss == "softmax":
                linked = target >= 0
                if linked.any():
                    total = total + F.cross_entropy(score[linked].float(), target[linked])
            else:
                real = (entities[:, k] > 0) & (target > -100).unsqueeze(-1)  # (B, S, C)
                if real.any():
                    slots = torch.arange(score.shape[-1], device=score.device)
                    positive = slots == target.unsqueeze(-1)
                    sign = positive.float() * 2 - 1
                    total = total + F.margin_ranking_loss(
                        score[real].float(),
                        torch.zeros_like(score[real].float()),
                        sign[real],
                        margin=self.margin,
                    )
            with torch.no_grad():
                linked = target >= 0
                spans += float(linked.sum())
                if linked.any():
                    correct += float((score[linked].argmax(-1) == target[linked]).sum())
        device = total.device
        return ObjectiveOutput(
            loss=total,
            metrics={
                "accuracy": torch.tensor(correct / spans if spans else 0.0, device=device),
                "linked_spans": torch.tensor(spans, device=device),
            },
        )


__all__ = ["LOSSES", "EntityLinkingObjective"]
