"""Fine-tuning heads: BERT's four task setups (Devlin et al., 2019, Fig. 4).

Each head maps the encoder's last hidden states to logits and never computes a loss (the
loss lives in :class:`~ptm_core.finetune.model.TaskModel`). Parameter layouts follow
Hugging Face's ``BertFor...`` classes so weights move both ways with a plain name map
(:mod:`ptm_core.checkpoints.hf.task_heads`). The pooled heads also take the variants of
the other families' ``...For...`` classes: ELECTRA's classification head
(``dropout -> dense -> GELU -> dropout -> out_proj``: ``activation="gelu"``,
``input_dropout=True``; RoBERTa's is the same with tanh), DistilBERT's ``pre_classifier``
(``activation="relu"``), ELECTRA's and XLNet's sequence summary (``pool``, ``activation``).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from ptm_core.heads.sentence_pair import Pooler
from ptm_core.modules.dropout import Dropout

PoolPosition = Literal["first", "last"]
POOL_POSITIONS: tuple[str, ...] = ("first", "last")
PoolerActivation = Literal["tanh", "gelu", "relu"]


def _linear(hidden_size: int, out_features: int, std: float) -> nn.Linear:
    layer = nn.Linear(hidden_size, out_features)
    nn.init.normal_(layer.weight, std=std)
    nn.init.zeros_(layer.bias)
    return layer


def check_pool(pool: str) -> None:
    """Raise a :class:`ValueError` listing the valid choices unless ``pool`` is one."""
    if pool not in POOL_POSITIONS:
        raise ValueError(f"unknown pool {pool!r}; valid: {', '.join(POOL_POSITIONS)}")


def summary_token(
    hidden_states: Tensor, pool: str = "first", attention_mask: Tensor | None = None
) -> Tensor:
    """The one state a sequence-level head reads.

    ``"first"`` is BERT's ``[CLS]`` (position 0). ``"last"`` is XLNet's summary (Yang et
    al., 2019): the last *real* token of each row, found from a ``(B, L)`` padding mask as
    the highest real position, so left padding (XLNet's tokenizer) and right padding give
    the same vector; position ``L - 1`` without a mask. A ``(B, L, L)`` visibility mask
    (K-BERT's visible matrix) gives the padding mask on its diagonal: a real token sees
    itself, padding sees nothing.

    Shapes:
        ``(B, L, D)`` (and ``(B, L)`` or ``(B, L, L)`` mask) ``-> (B, 1, D)``.
    """
    check_pool(pool)
    if pool == "first":
        return hidden_states[:, :1]
    if attention_mask is not None and attention_mask.dim() == 3:
        attention_mask = attention_mask.diagonal(dim1=1, dim2=2)  # (B, L)
    if attention_mask is None or attention_mask.dim() != 2:
        return hidden_states[:, -1:]
    # Counting real tokens would land on padding when rows are padded on the left.
    length = attention_mask.shape[1]
    last = length - 1 - attention_mask.bool().flip(1).long().argmax(dim=1)  # (B,)
    rows = torch.arange(hidden_states.shape[0], device=hidden_states.device)
    return hidden_states[rows, last][:, None]


class SequenceClassificationHead(nn.Module):
    """Sentence / sentence-pair classification or regression (BERT Fig. 4a, 4b).

    ``logits = W_c Dropout(tanh(W_p h + b_p)) + b_c`` with ``h`` the ``[CLS]`` state
    (``pool="first"``) or the last real token (``pool="last"``, XLNet's summary). With
    ``num_labels=1`` the single output is a regression score (STS-B). ELECTRA's head
    (Clark et al., 2020; ``ElectraClassificationHead``) is
    ``W_c Dropout(GELU(W_p Dropout(h) + b_p)) + b_c``: ``activation="gelu"``,
    ``input_dropout=True``.

    Args:
        hidden_size: encoder width ``D``.
        num_labels: number of classes ``N`` (1 for regression).
        dropout: dropout on the pooled vector (BERT: 0.1).
        pool: which token to summarise, ``"first"`` or ``"last"``.
        initializer_range: std of the normal initialisation of the classifier.
        activation: the pooler's activation, ``"tanh"`` (BERT), ``"gelu"`` (ELECTRA) or
            ``"relu"`` (DistilBERT).
        input_dropout: also drop out the summary token before the pooler (ELECTRA,
            RoBERTa).

    Shapes:
        ``(B, L, D) -> (B, N)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_labels: int,
        dropout: float = 0.1,
        pool: PoolPosition = "first",
        initializer_range: float = 0.02,
        activation: PoolerActivation = "tanh",
        input_dropout: bool = False,
    ) -> None:
        super().__init__()
        check_pool(pool)
        self.pool = pool
        self.input_dropout = input_dropout
        self.pooler = Pooler(hidden_size, activation)
        self.dropout = Dropout(dropout)
        self.classifier = _linear(hidden_size, num_labels, initializer_range)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        token = summary_token(hidden_states, self.pool, attention_mask)  # (B, 1, D)
        if self.input_dropout:
            token = self.dropout(token)
        return self.classifier(self.dropout(self.pooler(token)))  # (B, N)


class TokenClassificationHead(nn.Module):
    """Per-token tagging, e.g. BIO named entities (BERT Fig. 4d).

    ``logits_i = W Dropout(h_i) + b`` for every position; BERT scores each word by its
    first word piece (the loss masks the others with ``-100``).

    Args:
        hidden_size: encoder width ``D``.
        num_labels: number of tags ``N``.
        dropout: dropout on the token states.
        initializer_range: std of the normal initialisation of the classifier.

    Shapes:
        ``(B, L, D) -> (B, L, N)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_labels: int,
        dropout: float = 0.1,
        initializer_range: float = 0.02,
    ) -> None:
        super().__init__()
        self.dropout = Dropout(dropout)
        self.classifier = _linear(hidden_size, num_labels, initializer_range)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        return self.classifier(self.dropout(hidden_states))


class QuestionAnsweringHead(nn.Module):
    """Extractive span prediction, SQuAD (BERT Fig. 4c).

    A start vector ``S`` and an end vector ``E``: the score of token ``i`` as the start is
    ``S . h_i`` and as the end ``E . h_i`` (one ``D -> 2`` linear layer, as BERT and Hugging
    Face ``qa_outputs``; no dropout, as theirs). A span ``(i, j)`` scores
    ``S . h_i + E . h_j`` with ``j >= i``; SQuAD v2.0 compares the best span with the
    ``[CLS]`` "no answer" span ``(0, 0)``.

    Padding positions get the lowest finite logit, so neither softmax nor span search ever
    picks them: a row's loss and answer do not depend on how much padding its batch adds
    (Hugging Face's ``BertForQuestionAnswering`` scores padding from the encoder's states
    there, which makes its loss batch-dependent; at real positions the logits are the same).

    Args:
        hidden_size: encoder width ``D``.
        initializer_range: std of the normal initialisation.

    Shapes:
        ``(B, L, D) -> (B, L, 2)``: start logits in ``[..., 0]``, end logits in ``[..., 1]``.
    """

    def __init__(self, hidden_size: int, initializer_range: float = 0.02) -> None:
        super().__init__()
        self.qa_outputs = _linear(hidden_size, 2, initializer_range)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        logits = self.qa_outputs(hidden_states)  # (B, L, 2)
        if attention_mask is None:
            return logits
        if attention_mask.dim() == 3:  # a visibility matrix: padding sees nothing
            attention_mask = attention_mask.diagonal(dim1=1, dim2=2)
        padding = ~attention_mask.bool()[..., None]  # (B, L, 1)
        # The unpadded encoder leaves zeros at padding and the padded one leaves values that
        # depend on the batch: neither may enter the softmax over positions.
        return logits.masked_fill(padding, torch.finfo(logits.dtype).min)


class MultipleChoiceHead(nn.Module):
    """Multiple choice, SWAG (Devlin et al., 2019, Section 4.4).

    Each choice is encoded with the context as its own sequence; the pooled ``[CLS]`` state
    gets one score ``w . Dropout(tanh(W_p h + b_p))``, and a softmax over the ``C`` scores of
    an example picks the answer. ELECTRA's and XLNet's sequence summary are the same with
    their ``summary_activation`` (``activation``) and ``summary_type`` (``pool``).

    Args:
        hidden_size: encoder width ``D``.
        dropout: dropout on the pooled vector.
        pool: which token to summarise, ``"first"`` or ``"last"``.
        initializer_range: std of the normal initialisation of the scorer.
        activation: the pooler's activation, ``"tanh"``, ``"gelu"`` or ``"relu"``.
        input_dropout: also drop out the summary token before the pooler.

    Shapes:
        ``(B * C, L, D) -> (B, C)`` given ``num_choices=C``.
    """

    def __init__(
        self,
        hidden_size: int,
        dropout: float = 0.1,
        pool: PoolPosition = "first",
        initializer_range: float = 0.02,
        activation: PoolerActivation = "tanh",
        input_dropout: bool = False,
    ) -> None:
        super().__init__()
        check_pool(pool)
        self.pool = pool
        self.input_dropout = input_dropout
        self.pooler = Pooler(hidden_size, activation)
        self.dropout = Dropout(dropout)
        self.classifier = _linear(hidden_size, 1, initializer_range)

    def forward(
        self,
        hidden_states: Tensor,
        attention_mask: Tensor | None = None,
        *,
        num_choices: int,
    ) -> Tensor:
        token = summary_token(hidden_states, self.pool, attention_mask)  # (B*C, 1, D)
        if self.input_dropout:
            token = self.dropout(token)
        scores = self.classifier(self.dropout(self.pooler(token)))  # (B*C, 1)
        return scores.view(-1, num_choices)  # (B, C)
