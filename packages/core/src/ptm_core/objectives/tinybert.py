"""TinyBERT: layer-wise distillation (embeddings, attention, hidden states, predictions)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.objectives.base import IGNORE_INDEX, Batch, ObjectiveOutput, accuracy
from ptm_core.objectives.teacher import (
    MaskedLMTeacher,
    _DistillationBase,
    soft_cross_entropy,
    uniform_layer_map,
)
from ptm_core.tokenization import VocabInfo


class TinyBertObjective(_DistillationBase):
    """TinyBERT's layer-wise distillation (Jiao et al., 2020).

    With the uniform map ``g`` (:func:`uniform_layer_map`), student layer ``m`` learns
    teacher layer ``g(m)``:

    * embeddings: ``MSE(E_s W_e, E_t)``;
    * attention: ``MSE(A_s^m, A_t^{g(m)})`` over the pre-softmax scores of every head
      (masked entries left out; both need the same number of heads), read through the
      encoder's explicit attention path;
    * hidden states: ``MSE(H_s^m W_h, H_t^{g(m)})``, ``W_h`` a learned ``D_s -> D_t``
      projection (identity-free: learned even when the widths match);
    * prediction: soft cross-entropy of the MLM logits at the masked positions
      (temperature ``T``).

    The loss is the weighted sum of the four parts; the teacher is frozen, in eval mode.

    Args:
        encoder: the student.
        vocab: the shared tokenizer's ids.
        teacher: a :class:`MaskedLMTeacher`, a run directory, or None (construction only).
        teacher_hidden_size: teacher width when no teacher is given yet (for ``W_h``).
        temperature: soft-target temperature.
        embedding_weight, attention_weight, hidden_weight, prediction_weight: weights.
        mask_prob: MLM selection rate of the corrupted input both models see.
    """

    name = "tinybert"
    batch_keys = ("mlm_labels",)
    needs_hidden_states = True
    needs_attention_scores = True

    def __init__(
        self,
        encoder: TransformerEncoder,
        vocab: VocabInfo,
        *,
        teacher: MaskedLMTeacher | str | Path | None = None,
        teacher_hidden_size: int | None = None,
        temperature: float = 1.0,
        embedding_weight: float = 1.0,
        attention_weight: float = 1.0,
        hidden_weight: float = 1.0,
        prediction_weight: float = 1.0,
        mask_prob: float = 0.15,
    ) -> None:
        super().__init__(encoder, vocab, teacher, mask_prob)
        student = encoder.config
        width = (
            self.teacher.encoder.config.hidden_size
            if self.teacher is not None
            else teacher_hidden_size or student.hidden_size
        )
        if self.teacher is not None:
            t = self.teacher.encoder.config
            if t.num_heads != student.num_heads:
                raise ValueError(
                    f"attention distillation needs equal head counts: student "
                    f"{student.num_heads}, teacher {t.num_heads}"
                )
            self.layer_map = uniform_layer_map(student.num_layers, t.num_layers)
        else:
            self.layer_map = list(range(student.num_layers + 1))
        self.embedding_projection = nn.Linear(student.hidden_size, width)
        self.hidden_projection = nn.Linear(student.hidden_size, width)
        self.temperature = temperature
        self.weights = {
            "embedding": embedding_weight,
            "attention": attention_weight,
            "hidden": hidden_weight,
            "prediction": prediction_weight,
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        s_hidden, s_scores = encoder_output.hidden_states, encoder_output.attention_scores
        if s_hidden is None or s_scores is None:
            raise RuntimeError(
                "TinyBertObjective needs the student's hidden states and attention scores; "
                "run it inside PretrainingModel (it reads needs_hidden_states / "
                "needs_attention_scores)"
            )
        teacher_out, teacher_logits = self._teacher(batch["input_ids"].device)(
            batch, hidden_states=True, attention_scores=True
        )
        assert teacher_out.hidden_states is not None and teacher_out.attention_scores is not None
        real = batch.get("attention_mask", torch.ones_like(batch["input_ids"])).bool()
        parts: dict[str, Tensor] = {}
        parts["embedding"] = F.mse_loss(
            self.embedding_projection(s_hidden[0][real]).float(),
            teacher_out.hidden_states[0][real].float(),
        )
        attention = []
        hidden = []
        for m in range(1, len(self.layer_map)):
            g = self.layer_map[m]
            t_scores = teacher_out.attention_scores[g - 1].float()
            visible = t_scores > torch.finfo(t_scores.dtype).min / 2
            attention.append(F.mse_loss(s_scores[m - 1].float()[visible], t_scores[visible]))
            hidden.append(
                F.mse_loss(
                    self.hidden_projection(s_hidden[m][real]).float(),
                    teacher_out.hidden_states[g][real].float(),
                )
            )
        parts["attention"] = torch.stack(attention).sum()
        parts["hidden"] = torch.stack(hidden).sum()
        selected = batch["mlm_labels"] != IGNORE_INDEX
        student_logits = self.head(encoder_output.last_hidden_state[selected])
        parts["prediction"] = soft_cross_entropy(
            student_logits, teacher_logits[selected], self.temperature
        )
        loss = torch.stack([self.weights[k] * v for k, v in parts.items()]).sum()
        metrics = {k: v.detach() for k, v in parts.items()}
        metrics["accuracy"] = accuracy(student_logits, batch["mlm_labels"][selected])
        return ObjectiveOutput(loss=loss, metrics=metrics)
