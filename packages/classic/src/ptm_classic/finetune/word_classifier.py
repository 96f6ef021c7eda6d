"""Sentence classification over word-level features (static, ELMo, TagLM-style)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from ptm_classic.finetune.word_features import WordFeatures, run_bilstm


@dataclass
class WordClassifierOutput:
    """What :class:`WordClassifier` returns (the Trainer reads ``loss`` and ``metrics``).

    Attributes:
        loss: 0-d mean cross-entropy, or ``None`` without labels.
        logits: ``(B, C)``.
        metrics: ``accuracy`` (0-d, detached) when there are labels.
    """

    loss: Tensor | None
    logits: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class WordClassifier(nn.Module):
    """BiLSTM + max-pooling sentence classifier over :class:`WordFeatures`.

    The classification counterpart of :class:`~ptm_classic.finetune.taglm.TagLMTagger`, so one
    set of features (static vectors, ELMo's biLM, a frozen Transformer, or their
    concatenation) can be compared on both kinds of task (the BiLSTM-max encoder of
    Conneau et al., 2017)::

        features(w_1..w_n) -> dropout -> BiLSTM -> max over words -> dropout -> linear

    Args:
        features: the word-level input layer.
        num_labels: ``C`` classes.
        label_names: class names by index.
        lstm_hidden: hidden units per direction.
        dropout: dropout on the features and on the pooled vector.

    Shapes:
        ``forward(batch)``: ``features.encode``'s tensors plus optional ``labels (B,)``.
        Returns :class:`WordClassifierOutput` with ``logits (B, C)``.
    """

    kind = "classification"

    def __init__(
        self,
        features: WordFeatures,
        num_labels: int,
        *,
        label_names: Sequence[str] | None = None,
        lstm_hidden: int = 100,
        dropout: float = 0.5,
    ) -> None:
        super().__init__()
        if label_names is not None and len(label_names) != num_labels:
            raise ValueError(
                f"label_names has {len(label_names)} names but num_labels is {num_labels}"
            )
        self.num_labels = num_labels
        self.label_names = list(label_names) if label_names is not None else None
        self.settings: dict[str, Any] = {"lstm_hidden": lstm_hidden, "dropout": dropout}
        self.features = features
        self.dropout = nn.Dropout(dropout)
        self.lstm = nn.LSTM(features.output_dim, lstm_hidden, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * lstm_hidden, num_labels)

    def encode(
        self, sentences: Sequence[Sequence[str]], labels: Sequence[int] | None = None
    ) -> dict[str, Tensor]:
        """A batch for :meth:`forward`."""
        batch = self.features.encode(sentences)
        if labels is not None:
            batch["labels"] = torch.tensor(list(labels), dtype=torch.long)
        return batch

    def forward(self, batch: dict[str, Tensor]) -> WordClassifierOutput:
        word_mask = batch["word_mask"].bool()
        hidden = run_bilstm(self.lstm, self.dropout(self.features(batch)), word_mask)
        hidden = hidden.masked_fill(~word_mask.unsqueeze(-1), float("-inf"))
        pooled = hidden.max(dim=1).values  # (B, 2H)
        pooled = torch.where(torch.isfinite(pooled), pooled, torch.zeros_like(pooled))
        logits = self.classifier(self.dropout(pooled))
        labels = batch.get("labels")
        loss: Tensor | None = None
        metrics: dict[str, Tensor] = {}
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels)
            metrics["accuracy"] = (logits.argmax(-1) == labels).float().mean().detach()
        return WordClassifierOutput(loss=loss, logits=logits, metrics=metrics)

    @torch.no_grad()
    def predict(self, sentences: Sequence[Sequence[str]]) -> list[int]:
        """Best class of each sentence (call ``.eval()`` first)."""
        return self(self.encode(sentences)).logits.argmax(-1).tolist()
