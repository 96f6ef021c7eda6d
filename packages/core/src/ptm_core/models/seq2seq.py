"""An encoder-decoder and its sequence-to-sequence objective: what the trainer optimises."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective


@dataclass
class Seq2SeqPretrainingOutput:
    """Loss and metrics of one batch (what :class:`~ptm_core.training.Trainer` reads).

    Attributes:
        loss: the objective's loss (mean token cross-entropy over predicted positions).
        metrics: ``"<objective>/loss"`` and ``"<objective>/<metric>"`` (detached).
        logits: ``(B, T, V)``.
    """

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)
    logits: Tensor | None = None


class Seq2SeqPretrainingModel(nn.Module):
    """Runs an :class:`EncoderDecoderModel` and hands its output to the objective's loss
    side, as :class:`~ptm_core.models.PretrainingModel` does for encoders.

    Args:
        model: the encoder-decoder.
        objective: the BART/T5/MASS objective (its ``name`` prefixes the metrics).

    Batch keys: ``input_ids``, ``attention_mask`` ``(B, S)``; ``decoder_input_ids``,
    ``decoder_attention_mask``, ``labels`` ``(B, T)`` (``-100`` = not predicted).
    """

    def __init__(self, model: EncoderDecoderModel, objective: Seq2SeqObjective) -> None:
        super().__init__()
        self.model = model
        self.objective = objective

    def forward(self, batch: dict[str, Tensor]) -> Seq2SeqPretrainingOutput:
        out = self.model(
            batch["input_ids"],
            batch["decoder_input_ids"],
            attention_mask=batch.get("attention_mask"),
            decoder_attention_mask=batch.get("decoder_attention_mask"),
        )
        scored = self.objective(out, batch)
        name = self.objective.name
        metrics = {f"{name}/loss": scored.loss.detach()}
        metrics.update({f"{name}/{key}": value for key, value in scored.metrics.items()})
        return Seq2SeqPretrainingOutput(loss=scored.loss, metrics=metrics, logits=out.logits)
