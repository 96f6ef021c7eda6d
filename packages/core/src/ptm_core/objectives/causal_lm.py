"""Causal (left-to-right) language modelling: GPT on the shared encoder."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.modules.attention_masks import left_to_right_mask
from ptm_core.modules.attention_structure import real_tokens
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.tokenization import VocabInfo


def padding_of(batch: Batch) -> Tensor:
    """The ``(B, L)`` bool real-token mask of a padded batch.

    Uses the collator's ``[B, L]`` ``attention_mask``; when an earlier objective already
    replaced it with a ``[B, L, L]`` visibility matrix, a token is real if it sees itself
    (every builder in ``attention_masks`` hides padding rows); an
    :class:`~ptm_core.modules.attention_structure.AttentionStructure` knows its real tokens.
    """
    mask = batch.get("attention_mask")
    if mask is None:
        return torch.ones_like(batch["input_ids"], dtype=torch.bool)
    return real_tokens(mask)


def next_token_labels(input_ids: Tensor, padding: Tensor) -> Tensor:
    """Labels for next-token prediction: position ``i`` predicts ``input_ids[i + 1]``.

    Args:
        input_ids: ``(B, L)``.
        padding: ``(B, L)`` bool, True at real tokens.

    Returns:
        ``(B, L)`` long; ``-100`` where the next token is padding or past the end.
    """
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[:, :-1] = input_ids[:, 1:].masked_fill(~padding[:, 1:], IGNORE_INDEX)
    return labels


class CausalLMObjective(Objective):
    """Left-to-right language modelling (Radford et al., 2018, "GPT").

    Data side (per batch): a ``[B, L, L]`` left-to-right ``attention_mask`` (token ``i``
    sees real tokens ``<= i``; padding hidden) and ``lm_labels`` = the next token. Loss
    side: :class:`MaskedLMHead` tied to the token embeddings, used as the next-token
    head, and cross-entropy over every real position that has a successor (the
    ``[SEP]`` that ends a row is predicted, ``[CLS]`` never is).

    Args:
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        vocab: the tokenizer's vocabulary size.

    Batch keys: writes ``attention_mask`` ``(B, L, L)`` and ``lm_labels`` ``(B, L)``.
    Metrics: ``accuracy``, ``perplexity``, ``predictions``.
    """

    name = "clm"
    batch_keys = ("lm_labels",)

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        if vocab.vocab_size != vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{vocab_size}; build the encoder with the tokenizer's size"
            )
        self.head = MaskedLMHead(
            hidden_size,
            vocab_size,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            tie_to=tie_to,
            embedding_size=tie_to.weight.shape[1] if tie_to is not None else None,
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        padding = padding_of(batch)
        return {
            **batch,
            "attention_mask": left_to_right_mask(padding),
            "lm_labels": next_token_labels(batch["input_ids"], padding),
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["lm_labels"]
        selected = labels != IGNORE_INDEX
        logits = self.head(encoder_output.last_hidden_state[selected])  # (N, V)
        targets = labels[selected]
        loss = F.cross_entropy(logits.float(), targets)
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": accuracy(logits, targets),
                "perplexity": loss.detach().exp(),
                "predictions": selected.sum().detach().float(),
            },
        )
