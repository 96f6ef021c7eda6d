"""SpanBERT's Span Boundary Objective (the loss side; spans come from span masking)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.span_boundary import SpanBoundaryHead
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.objectives.span import SPAN_KEYS
from ptm_core.tokenization import VocabInfo


class SpanBoundaryObjective(Objective):
    """Span Boundary Objective (Joshi et al., 2020, "SpanBERT", Sec. 3.2).

    Each masked piece ``x_i`` of a span ``(s, e)`` is predicted from the encoder states
    of the two boundary tokens ``x_(s-1)``, ``x_(e+1)`` and the relative position
    ``i - s`` through :class:`SpanBoundaryHead`; the loss is the cross-entropy. SpanBERT's
    total loss is MLM + SBO: put this objective *after* a
    :class:`~ptm_core.objectives.span.SpanMaskingObjective` in the same mix (it has no
    data side of its own and reads the span keys that one writes).

    Args:
        hidden_size, vocab_size, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        tie_to: the token table; the decoder is tied to it when it is as wide as the
            encoder.
        vocab: the tokenizer's vocabulary size.
        max_positions: relative-position table size of the head.

    Batch keys (read): ``mlm_labels``, ``span_left``, ``span_right``, ``span_position``.
    """

    name = "sbo"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        max_positions: int = 32,
    ) -> None:
        super().__init__()
        tie = tie_to is not None and tuple(tie_to.weight.shape) == (vocab_size, hidden_size)
        self.head = SpanBoundaryHead(
            hidden_size,
            vocab_size,
            max_positions=max_positions,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            tie_to=tie_to if tie else None,
        )

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        missing = [key for key in ("mlm_labels", *SPAN_KEYS) if key not in batch]
        if missing:
            raise KeyError(
                f"SpanBoundaryObjective needs batch keys {missing}, written by "
                "SpanMaskingObjective; list a SpanMaskingObjective before it in the objective mix"
            )
        labels = batch["mlm_labels"]
        rows, cols = (labels != IGNORE_INDEX).nonzero(as_tuple=True)  # (N,), (N,)
        hidden = encoder_output.last_hidden_state  # (B, L, D)
        left = hidden[rows, batch["span_left"][rows, cols]]  # (N, D)
        right = hidden[rows, batch["span_right"][rows, cols]]
        logits = self.head(left, right, batch["span_position"][rows, cols])  # (N, V)
        targets = labels[rows, cols]
        loss = (
            F.cross_entropy(logits.float(), targets)
            if targets.numel()
            else logits.sum() * 0.0  # no masked token in the batch: zero, with a graph
        )
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": accuracy(logits, targets),
                "predictions": torch.tensor(float(targets.numel())),
            },
        )
