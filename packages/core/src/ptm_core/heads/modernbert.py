"""ModernBERT's fine-tuning heads (Warner et al., 2024; transformers' ``ModernBertFor...``).

Every task reads the encoder's states through ``ModernBertPredictionHead``
(``LN(act(W h + b))``), then dropout and one ``classifier`` linear layer:

- classification / regression: on the pooled state, ``[CLS]`` (``pool="first"``) or the
  mean of the real tokens (``pool="mean"``, ``classifier_pooling``);
- tagging: on every token;
- qa: on every token, ``D -> 2`` (start, end); padding gets the lowest logit, as ptm's
  :class:`~ptm_core.heads.tasks.QuestionAnsweringHead`;
- multiple_choice: on each choice's pooled state, ``D -> 1``.

The norm always has a bias here (zero when imported from a folder whose norms have none;
the export folds a trained one into the classifier bias: the classifier is linear).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ptm_core.modules.dropout import Dropout
from ptm_core.modules.feed_forward import get_activation

MODERNBERT_POOLS = ("first", "mean")


class ModernBertTaskHead(nn.Module):
    """One head for ``kind`` (see the module docstring).

    Args:
        hidden_size: encoder width ``D``.
        kind: ``classification``, ``regression``, ``tagging``, ``qa`` or
            ``multiple_choice``.
        num_labels: classes (1 for regression), tags; ignored by qa and multiple choice.
        dropout: dropout between the prediction head and the classifier.
        pool: the sequence-level summary, ``"first"`` or ``"mean"``.
        activation: the prediction head's activation (the encoder's).
        layer_norm_eps: the prediction head norm's epsilon.
        initializer_range: std of the normal initialisation.

    Shapes:
        ``(B, L, D)`` -> ``(B, N)``, ``(B, L, N)``, ``(B, L, 2)`` or ``(B / C, C)``.
    """

    def __init__(
        self,
        hidden_size: int,
        kind: str,
        num_labels: int,
        dropout: float = 0.0,
        *,
        pool: str = "first",
        activation: str = "gelu",
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
    ) -> None:
        super().__init__()
        if pool not in MODERNBERT_POOLS:
            raise ValueError(
                f"unknown pool {pool!r} for a ModernBERT head; valid: {', '.join(MODERNBERT_POOLS)}"
            )
        self.kind = kind
        self.pool = pool
        self.activation_name = activation
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = get_activation(activation)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)
        outputs = {"qa": 2, "multiple_choice": 1}.get(kind, num_labels)
        self.classifier = nn.Linear(hidden_size, outputs)
        for linear in (self.dense, self.classifier):
            nn.init.normal_(linear.weight, std=initializer_range)
            nn.init.zeros_(linear.bias)

    def transform(self, states: Tensor) -> Tensor:
        """``dropout(LN(act(W h + b)))``: what the classifier reads."""
        return self.dropout(self.norm(self.activation(self.dense(states))))

    def summary(self, hidden_states: Tensor, attention_mask: Tensor | None) -> Tensor:
        """``(B, L, D) -> (B, D)``: the ``[CLS]`` state or the mean of the real tokens."""
        if self.pool == "first":
            return hidden_states[:, 0]
        if attention_mask is None:
            return hidden_states.mean(dim=1)
        if attention_mask.dim() == 3:
            attention_mask = attention_mask.diagonal(dim1=1, dim2=2)
        weights = attention_mask.to(hidden_states.dtype).unsqueeze(-1)  # (B, L, 1)
        return (hidden_states * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        *,
        num_choices: int | None = None,
    ) -> Tensor:
        if self.kind in ("tagging", "qa"):
            logits = self.classifier(self.transform(hidden_states))
            if self.kind == "qa" and attention_mask is not None:
                if attention_mask.dim() == 3:
                    attention_mask = attention_mask.diagonal(dim1=1, dim2=2)
                padding = ~attention_mask.bool()[..., None]
                logits = logits.masked_fill(padding, torch.finfo(logits.dtype).min)
            return logits
        logits = self.classifier(self.transform(self.summary(hidden_states, attention_mask)))
        if self.kind == "multiple_choice":
            if num_choices is None:
                raise ValueError("a multiple_choice head needs num_choices")
            return logits.view(-1, num_choices)
        return logits
