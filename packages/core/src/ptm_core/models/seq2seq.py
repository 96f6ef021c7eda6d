"""An encoder-decoder plus the token cross-entropy of sequence-to-sequence pre-training."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.objectives.base import IGNORE_INDEX


@dataclass
class Seq2SeqPretrainingOutput:
    """Loss and metrics of one batch (what :class:`~ptm_core.training.Trainer` reads).

    Attributes:
        loss: mean token cross-entropy over predicted (non-ignored) positions.
        metrics: ``loss`` and ``accuracy`` (detached).
        logits: ``(B, T, V)``.
    """

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)
    logits: Tensor | None = None


class Seq2SeqPretrainingModel(nn.Module):
    """Wraps an :class:`EncoderDecoderModel` for BART/T5/MASS pre-training.

    Args:
        model: the encoder-decoder.
        name: metric prefix (the objective's name).

    Batch keys: ``input_ids``, ``attention_mask`` ``(B, S)``; ``decoder_input_ids``,
    ``decoder_attention_mask``, ``labels`` ``(B, T)`` (``-100`` = not predicted).
    """

    def __init__(self, model: EncoderDecoderModel, name: str = "seq2seq") -> None:
        super().__init__()
        self.model = model
        self.name = name

    def forward(self, batch: dict[str, Tensor]) -> Seq2SeqPretrainingOutput:
        out = self.model(
            batch["input_ids"],
            batch["decoder_input_ids"],
            attention_mask=batch.get("attention_mask"),
            decoder_attention_mask=batch.get("decoder_attention_mask"),
        )
        labels = batch["labels"]
        loss = F.cross_entropy(
            out.logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
        )
        predicted = labels != IGNORE_INDEX
        correct = (out.logits.argmax(-1) == labels) & predicted
        accuracy = correct.sum() / predicted.sum().clamp(min=1)
        return Seq2SeqPretrainingOutput(
            loss=loss,
            metrics={
                f"{self.name}/loss": loss.detach(),
                f"{self.name}/accuracy": accuracy.detach().float(),
            },
            logits=out.logits,
        )
