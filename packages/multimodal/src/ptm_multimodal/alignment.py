"""Multimodal alignment prediction (ViLBERT): is this caption about this image?"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch, accuracy
from ptm_core.tokenization import VocabInfo


class AlignmentHead(nn.Module):
    """Pooled text ``h_CLS`` and pooled image ``h_IMG``, each ``ReLU(W x + b)`` into a
    shared width, multiplied element-wise, then a linear 2-way classifier (Lu et al., 2019).

    Shapes:
        text ``(B, L, D_t)``, image ``(B, 1 + R, D_v)`` -> ``(B, 2)``.
    """

    def __init__(self, text_size: int, image_size: int, inner_size: int) -> None:
        super().__init__()
        self.text_pooler = nn.Linear(text_size, inner_size)
        self.image_pooler = nn.Linear(image_size, inner_size)
        self.classifier = nn.Linear(inner_size, 2)
        for linear in (self.text_pooler, self.image_pooler, self.classifier):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, text: Tensor, image: Tensor) -> Tensor:
        pooled_text = F.relu(self.text_pooler(text[:, 0]))  # (B, D_co)
        pooled_image = F.relu(self.image_pooler(image[:, 0]))  # global image token
        return self.classifier(pooled_text * pooled_image)


class AlignmentObjective(Objective):
    """Multimodal alignment prediction (Lu et al., 2019, §3.2).

    Data side: swapped-caption negatives from :class:`~ptm_multimodal.data.ImageTextBatches`.
    Loss side: :class:`AlignmentHead` -> cross-entropy against ``match_label`` (1 = aligned).

    Args:
        encoder: the :class:`~ptm_multimodal.vilbert.VilbertModel`.
        vocab: unused (uniform objective factory signature).
        inner_size: pooled width (default: the model's co-attention width).
    """

    name = "align"
    batch_keys = ("match_label",)

    def __init__(self, encoder, vocab: VocabInfo | None = None, *, inner_size: int | None = None):
        super().__init__()
        inner = inner_size or encoder.hyperparameters.get(
            "co_hidden_size", encoder.image_hidden_size
        )
        self.head = AlignmentHead(encoder.hidden_size, encoder.image_hidden_size, inner)

    def logits(self, encoder_output) -> Tensor:
        return self.head(encoder_output.last_hidden_state, encoder_output.image_hidden_state)

    def forward(self, encoder_output, batch: Batch) -> ObjectiveOutput:
        logits = self.logits(encoder_output)
        labels = batch["match_label"]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )
