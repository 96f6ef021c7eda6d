"""Masked language modelling (BERT; dynamic masking as RoBERTa)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.objectives.base import (
    IGNORE_INDEX,
    Batch,
    Example,
    Objective,
    ObjectiveOutput,
    accuracy,
)
from ptm_core.tokenization import VocabInfo

MaskingMode = Literal["dynamic", "static"]


def select_positions(candidates: Tensor, rate: float, generator: torch.Generator) -> Tensor:
    """Choose ``rate`` of each row's candidate positions uniformly at random.

    Each row gets ``floor(rate * n + u)`` positions with ``u ~ U(0, 1)`` (fairseq's
    unbiased rounding: the expected count is exactly ``rate * n``, so short sequences are
    not systematically over- or under-masked), at least one when the row has candidates.

    Args:
        candidates: ``(B, L)`` bool, positions that may be chosen.
        rate: fraction to choose.
        generator: the seeded source of randomness.

    Returns:
        ``(B, L)`` bool selection, a subset of ``candidates``.
    """
    counts = candidates.sum(dim=1)  # (B,)
    jitter = torch.rand(counts.shape, generator=generator)
    k = torch.floor(counts.float() * rate + jitter).long().clamp(min=1)
    k = torch.minimum(k, counts)
    keys = torch.rand(candidates.shape, generator=generator)
    keys = keys.masked_fill(~candidates, 2.0)  # non-candidates sort last
    ranks = keys.argsort(dim=1).argsort(dim=1)
    return (ranks < k[:, None]) & candidates


def regular_token_ids(vocab: VocabInfo) -> Tensor:
    """Ids a random replacement may draw: every id except the special tokens."""
    keep = torch.ones(vocab.vocab_size, dtype=torch.bool)
    keep[list(vocab.special_ids)] = False
    return keep.nonzero().squeeze(1)


def apply_replacements(
    input_ids: Tensor,
    selected: Tensor,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> Tensor:
    """BERT's 80/10/10 rule on the selected positions.

    Of the selected positions, ``mask_token_prob`` become ``[MASK]``,
    ``random_token_prob`` become a uniformly drawn non-special token and the rest keep
    their token.

    Args:
        input_ids: ``(B, L)`` token ids (not modified).
        selected: ``(B, L)`` bool positions to corrupt.
        vocab: special ids and vocabulary size.
        generator: the seeded source of randomness.

    Returns:
        ``(B, L)`` corrupted ids.
    """
    draw = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (draw < mask_token_prob)
    to_random = selected & (draw >= mask_token_prob) & (draw < mask_token_prob + random_token_prob)
    corrupted = input_ids.masked_fill(to_mask, vocab.mask_id)
    allowed = regular_token_ids(vocab)
    picks = allowed[torch.randint(len(allowed), input_ids.shape, generator=generator)]
    return torch.where(to_random, picks, corrupted)


def mask_tokens(
    input_ids: Tensor,
    special_tokens_mask: Tensor,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """BERT masking: select ``mask_prob`` of non-special tokens, then 80/10/10.

    Args:
        input_ids: ``(B, L)`` token ids; padding must be marked special.
        special_tokens_mask: ``(B, L)`` 1/True for [CLS], [SEP], [PAD], ... (never chosen).
        vocab: special ids and vocabulary size.
        generator: the seeded source of randomness.

    Returns:
        ``(corrupted_ids, labels)``, both ``(B, L)``; labels hold the original id at
        selected positions and ``-100`` elsewhere.
    """
    candidates = ~special_tokens_mask.bool()
    selected = select_positions(candidates, mask_prob, generator)
    corrupted = apply_replacements(
        input_ids,
        selected,
        vocab,
        generator,
        mask_token_prob=mask_token_prob,
        random_token_prob=random_token_prob,
    )
    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    return corrupted, labels


class MaskedLMObjective(Objective):
    """Masked language modelling (Devlin et al., 2019; dynamic masking: Liu et al., 2019).

    Data side: choose 15% of non-special tokens; of those, 80% -> ``[MASK]``, 10% -> a
    random token, 10% unchanged. ``mode="static"`` fixes the masks once per example at
    preprocessing (BERT); ``mode="dynamic"`` re-draws them every time a batch is built
    (RoBERTa). Loss side: :class:`MaskedLMHead` tied to the token embeddings,
    cross-entropy on the selected positions only.

    Args:
        vocab: the tokenizer's special ids and vocabulary size.
        hidden_size: width of the states the head reads.
        vocab_size: rows of the output projection (the encoder's token table).
        tie_to: the token table the decoder weight is tied to (``None``: untied).
        activation: the head transform's activation (the encoder's).
        layer_norm_eps: the head transform's LayerNorm epsilon (the encoder's).
        mask_prob: fraction of non-special tokens selected.
        mask_token_prob: fraction of selected tokens replaced by ``[MASK]``.
        random_token_prob: fraction replaced by a random token.
        mode: ``"dynamic"`` or ``"static"``.
        masked_only: project only the selected positions through the head (same loss,
            far less work: the vocabulary projection dominates small models).

    Rows of different sources in one batch: when the batch carries ``mlm_row_groups``
    ``(B,)`` (small ints), the loss is the sum over the groups present of each group's
    mean over its selected tokens, and each group's loss is logged as ``group<g>_loss``
    (VL-BERT's image-text and text-only rows, jackroos/VL-BERT's ``mlm_loss_wvc +
    mlm_loss_aux``: a group of long rows does not drown the other).

    Batch keys: reads ``input_ids``, ``special_tokens_mask``, optional ``mlm_row_groups``;
    writes ``input_ids`` (corrupted) and ``mlm_labels`` ``(B, L)``.
    """

    name = "mlm"
    batch_keys = ("mlm_labels",)

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        mode: MaskingMode = "dynamic",
        masked_only: bool = True,
    ) -> None:
        super().__init__()
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be in (0, 1), got {mask_prob}")
        if mask_token_prob < 0 or random_token_prob < 0 or mask_token_prob + random_token_prob > 1:
            raise ValueError(
                "mask_token_prob and random_token_prob must be >= 0 and sum to at most 1, got "
                f"{mask_token_prob} and {random_token_prob}"
            )
        if mode not in ("dynamic", "static"):
            raise ValueError(f"mode must be 'dynamic' or 'static', got {mode!r}")
        if vocab.vocab_size != vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{vocab_size}; build the encoder with the tokenizer's size"
            )
        self.vocab = vocab
        self.mask_prob = mask_prob
        self.mask_token_prob = mask_token_prob
        self.random_token_prob = random_token_prob
        self.mode = mode
        self.masked_only = masked_only
        self.head = MaskedLMHead(
            hidden_size,
            vocab_size,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            tie_to=tie_to,
        )

    def corrupt(self, input_ids: Tensor, special_tokens_mask: Tensor, generator: torch.Generator):
        """Apply this objective's masking to ``(B, L)`` ids; returns ``(ids, labels)``."""
        return mask_tokens(
            input_ids,
            special_tokens_mask,
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )

    def prepare_example(self, example: Example, generator: torch.Generator) -> Example:
        if self.mode != "static":
            return example
        ids, labels = self.corrupt(
            torch.tensor([example["input_ids"]]),
            torch.tensor([example["special_tokens_mask"]]),
            generator,
        )
        return {**example, "input_ids": ids[0].tolist(), "mlm_labels": labels[0].tolist()}

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if self.mode != "dynamic":
            return batch
        ids, labels = self.corrupt(batch["input_ids"], batch["special_tokens_mask"], generator)
        return {**batch, "input_ids": ids, "mlm_labels": labels}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["mlm_labels"]
        hidden = encoder_output.last_hidden_state
        if self.masked_only:
            selected = labels != IGNORE_INDEX
            logits = self.head(hidden[selected])  # (N, V)
            targets = labels[selected]
        else:
            logits = self.head(hidden).flatten(0, 1)  # (B*L, V)
            targets = labels.flatten()
        kept = targets != IGNORE_INDEX
        metrics = {
            "accuracy": accuracy(logits[kept], targets[kept]),
            "predictions": kept.sum().detach().float(),
        }
        if "mlm_row_groups" not in batch:
            loss = F.cross_entropy(logits.float(), targets, ignore_index=IGNORE_INDEX)
            return ObjectiveOutput(loss=loss, metrics=metrics)
        rows = batch["mlm_row_groups"][:, None].expand_as(labels)
        groups = rows[selected] if self.masked_only else rows.flatten()
        per_token = F.cross_entropy(
            logits.float(), targets, ignore_index=IGNORE_INDEX, reduction="none"
        )
        loss = per_token.sum() * 0.0  # a graph even when nothing is selected
        for group in groups[kept].unique().tolist():
            part = per_token[kept & (groups == group)].mean()
            metrics[f"group{group}_loss"] = part.detach()
            loss = loss + part
        return ObjectiveOutput(loss=loss, metrics=metrics)
