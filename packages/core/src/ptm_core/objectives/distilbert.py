"""DistilBERT: soft targets, MLM and hidden-state cosine from a frozen teacher."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.objectives.base import IGNORE_INDEX, Batch, ObjectiveOutput, accuracy
from ptm_core.objectives.teacher import MaskedLMTeacher, _DistillationBase, soft_cross_entropy
from ptm_core.tokenization import VocabInfo


class DistilBertObjective(_DistillationBase):
    """DistilBERT's triple loss (Sanh et al., 2019).

    ``loss = ce_weight * CE(softmax(t/T), softmax(s/T)) + mlm_weight * MLM
    + cosine_weight * (1 - cos(h_s, h_t))``; defaults ``5.0, 2.0, 1.0`` as released. The
    soft-target cross-entropy and MLM are taken at the masked positions (the teacher sees
    the same corrupted input), the cosine loss between the last hidden states of every
    real token (widths must match: the student is the teacher with half its layers, see
    :func:`init_student_from_teacher`). The teacher is frozen and stays in eval mode.

    Args:
        encoder: the student.
        vocab: the shared tokenizer's ids.
        teacher: a :class:`MaskedLMTeacher`, a run directory to load one from, or None
            (construction only; training then fails with a message).
        temperature: softmax temperature ``T`` of the soft targets.
        ce_weight, mlm_weight, cosine_weight: the three weights.
        mask_prob: MLM selection rate (80/10/10 as BERT).
        init_head_from_teacher: start the student's MLM head (dense, norm, decoder bias)
            as the teacher's when the widths match, as DistilBERT does.

    Batch keys: writes ``input_ids`` (masked) and ``mlm_labels``.
    """

    name = "distil"
    batch_keys = ("mlm_labels",)

    def __init__(
        self,
        encoder: TransformerEncoder,
        vocab: VocabInfo,
        *,
        teacher: MaskedLMTeacher | str | Path | None = None,
        temperature: float = 2.0,
        ce_weight: float = 5.0,
        mlm_weight: float = 2.0,
        cosine_weight: float = 1.0,
        mask_prob: float = 0.15,
        init_head_from_teacher: bool = True,
    ) -> None:
        super().__init__(encoder, vocab, teacher, mask_prob)
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        if init_head_from_teacher and self.teacher is not None:
            own, theirs = self.head.state_dict(), self.teacher.head.state_dict()
            if all(own[k].shape == theirs[k].shape for k in own):
                # DistilBERT starts the student's MLM head as the teacher's (tied decoder kept).
                self.head.load_state_dict(
                    {k: v for k, v in theirs.items() if k != "decoder.weight"}, strict=False
                )
        self.temperature = temperature
        self.ce_weight = ce_weight
        self.mlm_weight = mlm_weight
        self.cosine_weight = cosine_weight

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["mlm_labels"]
        teacher_out, teacher_logits = self._teacher(labels.device)(batch)
        selected = labels != IGNORE_INDEX
        student_logits = self.head(encoder_output.last_hidden_state[selected])  # (N, V)
        targets = labels[selected]
        soft_ce = soft_cross_entropy(student_logits, teacher_logits[selected], self.temperature)
        mlm = F.cross_entropy(student_logits.float(), targets) if len(targets) else soft_ce * 0
        real = batch.get("attention_mask", torch.ones_like(labels)).bool()
        s_hidden = encoder_output.last_hidden_state[real].float()  # (M, D)
        t_hidden = teacher_out.last_hidden_state[real].float()
        cosine = 1.0 - F.cosine_similarity(s_hidden, t_hidden, dim=-1).mean()
        loss = self.ce_weight * soft_ce + self.mlm_weight * mlm + self.cosine_weight * cosine
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "soft_ce": soft_ce.detach(),
                "mlm": mlm.detach(),
                "cosine": cosine.detach(),
                "accuracy": accuracy(student_logits, targets),
            },
        )
