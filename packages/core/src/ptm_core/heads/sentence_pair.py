"""Pooler and sentence-level classification heads (NSP, SOP, task heads)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

POOLER_ACTIVATIONS: tuple[str, ...] = ("tanh", "gelu", "relu")


class Pooler(nn.Module):
    """BERT pooler: ``tanh(W h_[CLS] + b)`` over the first token.

    ELECTRA's classification head and sequence summary (Clark et al., 2020) use the same
    projection with GELU instead of tanh (``activation="gelu"``); DistilBERT's
    ``pre_classifier`` (Sanh et al., 2019) with ReLU (``activation="relu"``).

    Args:
        hidden_size: encoder width ``D``.
        activation: ``"tanh"`` (BERT, RoBERTa, ALBERT, XLNet), ``"gelu"`` (ELECTRA; the
            exact erf form, as ``transformers``' ``"gelu"``) or ``"relu"`` (DistilBERT).

    Shapes:
        ``(B, L, D) -> (B, D)``.
    """

    def __init__(self, hidden_size: int, activation: str = "tanh") -> None:
        super().__init__()
        if activation not in POOLER_ACTIVATIONS:
            raise ValueError(
                f"unknown pooler activation {activation!r}; valid: {', '.join(POOLER_ACTIVATIONS)}"
            )
        self.activation = activation
        self.dense = nn.Linear(hidden_size, hidden_size)
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden_states: Tensor) -> Tensor:
        projected = self.dense(hidden_states[:, 0])
        if self.activation == "gelu":
            return F.gelu(projected)
        if self.activation == "relu":
            return torch.relu(projected)
        return torch.tanh(projected)


class SentencePairHead(nn.Module):
    """Classifier over the pooled ``[CLS]`` state, as BERT's next-sentence prediction.

    Used for NSP (Devlin et al., 2019) and SOP (Lan et al., 2020, ALBERT): both are a
    two-way decision on the pair; only the data side differs.

    Args:
        hidden_size: encoder width ``D``.
        num_labels: output classes (2 for NSP/SOP).
        pooler: the pooler to use (a fresh one by default).

    Shapes:
        ``(B, L, D) -> (B, num_labels)``.
    """

    def __init__(self, hidden_size: int, num_labels: int = 2, pooler: Pooler | None = None):
        super().__init__()
        self.pooler = pooler if pooler is not None else Pooler(hidden_size)
        self.classifier = nn.Linear(hidden_size, num_labels)
        nn.init.normal_(self.classifier.weight, std=0.02)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, hidden_states: Tensor) -> Tensor:
        return self.classifier(self.pooler(hidden_states))
