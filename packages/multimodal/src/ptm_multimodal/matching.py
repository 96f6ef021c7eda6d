"""Image-text matching from the pooled ``[CLS]`` state (VisualBERT's sentence-image task)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from ptm_core.encoders import EncoderOutput
from ptm_core.heads import SentencePairHead
from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch, accuracy
from ptm_core.tokenization import VocabInfo


class ImageTextMatchObjective(Objective):
    """Sentence-image prediction (Li et al., 2019, VisualBERT §3.2).

    Data side: :class:`~ptm_multimodal.data.ImageTextBatches` swaps captions between images
    to make negatives. Loss side: pooled ``[CLS]`` -> :class:`SentencePairHead` -> 2-way
    cross-entropy.

    Label convention: ``match_label`` 1 = the caption describes the image, 0 = swapped.
    (Hugging Face's ``sentence_image_labels`` use 0 = match; the checkpoint loader swaps
    the classifier rows so logits keep their meaning.)

    Args:
        vocab: unused (objective factories are all called with ``vocab=``).
        hidden_size: width of the pooled state the head reads.

    Batch keys: reads ``match_label`` ``(B,)``.
    """

    name = "itm"
    batch_keys = ("match_label",)

    def __init__(self, vocab: VocabInfo | None = None, *, hidden_size: int) -> None:
        super().__init__()
        self.head = SentencePairHead(hidden_size, num_labels=2)

    def logits(self, encoder_output: EncoderOutput) -> Tensor:
        """``(B, 2)`` logits; column 1 = match."""
        return self.head(encoder_output.last_hidden_state)

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        logits = self.logits(encoder_output)
        labels = batch["match_label"]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )
