"""XLNet permutation language modelling (Yang et al., 2019) on the core encoder.

For each row a factorisation order ``z`` of its tokens is sampled; the model maximises
``log p(x_{z_t} | x_{z_<t})`` for the last ``1/K`` of the order (partial prediction). No
token is corrupted: the order lives entirely in two attention masks
(:func:`~ptm_core.modules.attention_masks.permutation_masks`), and the prediction for
``z_t`` comes from XLNet's query stream, which knows the position ``z_t`` but not the
content ``x_{z_t}``. The encoder must use relative positions
(``position_encoding="relative"``), which is what gives the query stream its position.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.encoders.xlnet import XLNetConfig
from ptm_core.modules.attention_masks import permutation_masks
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.objectives.causal_lm import padding_of
from ptm_core.tokenization import VocabInfo


def span_partition(count: int, generator: torch.Generator, max_span: int = 5) -> list[int]:
    """Cut ``count`` positions, left to right, into spans of length ~ Uniform{1..max_span}.

    The last span is cut at ``count``. Returns the span lengths (they sum to ``count``).
    """
    if max_span < 1:
        raise ValueError(f"max_span must be >= 1, got {max_span}")
    lengths: list[int] = []
    remaining = count
    while remaining > 0:
        length = min(int(torch.randint(1, max_span + 1, (1,), generator=generator)), remaining)
        lengths.append(length)
        remaining -= length
    return lengths


def sample_order(
    count: int,
    generator: torch.Generator,
    *,
    span_based: bool = False,
    max_span: int = 5,
) -> Tensor:
    """A factorisation order of ``count`` positions (``0 .. count-1``).

    Args:
        count: number of positions to order.
        generator: the data-side random stream.
        span_based: instead of a uniform permutation, cut the positions into consecutive
            spans (:func:`span_partition`), shuffle the spans and keep each span's tokens
            together, left to right (XLNet's span-based prediction: the targets at the end
            of the order are mostly whole spans).
        max_span: longest span when ``span_based``.

    Returns:
        ``(count,)`` long: ``order[t]`` is the position predicted ``t``-th.
    """
    if not span_based:
        return torch.randperm(count, generator=generator)
    spans = list(torch.arange(count).split(span_partition(count, generator, max_span)))
    if not spans:
        return torch.zeros(0, dtype=torch.long)
    shuffled = torch.randperm(len(spans), generator=generator).tolist()
    return torch.cat([spans[i] for i in shuffled])


def num_predictions(count: int, partial_k: float) -> int:
    """Targets per row: the last ``1/K`` of an order of ``count`` tokens, at least one."""
    if count == 0:
        return 0
    return max(1, min(count, round(count / partial_k)))


def permutation_batch(
    input_ids: Tensor,
    special_tokens_mask: Tensor,
    padding: Tensor,
    generator: torch.Generator,
    *,
    partial_k: float = 6.0,
    span_based: bool = False,
    max_span: int = 5,
    bidirectional_context: bool = False,
) -> dict[str, Tensor]:
    """The masks, query positions and labels of one permutation-LM batch.

    Special tokens ([CLS], [SEP]) are never predicted; they sit at rank ``-1`` (before
    every other token) and are context for all. The other real tokens get a sampled order
    (:func:`sample_order`); the last ``num_predictions`` of it are the targets.

    Args:
        input_ids: ``(B, L)``.
        special_tokens_mask: ``(B, L)`` 1 at special tokens (padding may be either).
        padding: ``(B, L)`` bool, True at real tokens.
        generator: the data-side random stream.
        partial_k: ``K`` of partial prediction (predict ``1/K`` of the order).
        span_based: span-based orders (see :func:`sample_order`).
        max_span: longest span when ``span_based``.
        bidirectional_context: give every non-target token the same rank, so the content
            stream encodes the context bidirectionally (XLNet's released code); targets
            keep their order. ``False`` follows the paper's order for every token.

    Returns:
        ``attention_mask`` ``(B, L, L)`` content-stream visibility, ``query_positions``
        ``(B, P)``, ``query_attention_mask`` ``(B, P, L)``, ``plm_labels`` ``(B, P)``
        (``-100`` where a row has fewer than ``P`` targets), ``order_ranks`` ``(B, L)``.
    """
    if partial_k < 1:
        raise ValueError(f"partial_k must be >= 1 (predict 1/K of each order), got {partial_k}")
    batch, length = input_ids.shape
    candidates = padding & ~special_tokens_mask.bool()
    ranks = torch.full((batch, length), -1, dtype=torch.long)
    targets_per_row: list[Tensor] = []
    for row in range(batch):
        positions = candidates[row].nonzero().squeeze(1)
        order = positions[
            sample_order(len(positions), generator, span_based=span_based, max_span=max_span)
        ]
        ranks[row, order] = torch.arange(len(order))
        predict = num_predictions(len(order), partial_k)
        targets = order[len(order) - predict :]
        if bidirectional_context:
            ranks[row, order[: len(order) - predict]] = -1
        targets_per_row.append(targets)
    ranks = ranks.masked_fill(~padding, length)  # padding last (and hidden anyway)
    content, query = permutation_masks(ranks, padding)
    count = max((len(t) for t in targets_per_row), default=0)
    query_positions = torch.zeros(batch, max(count, 1), dtype=torch.long)
    labels = torch.full((batch, max(count, 1)), IGNORE_INDEX, dtype=torch.long)
    for row, targets in enumerate(targets_per_row):
        query_positions[row, : len(targets)] = targets
        labels[row, : len(targets)] = input_ids[row, targets]
    rows = query_positions[:, :, None].expand(-1, -1, length)
    return {
        "attention_mask": content,
        "query_positions": query_positions,
        "query_attention_mask": query.gather(1, rows),
        "plm_labels": labels,
        "order_ranks": ranks,
    }


class PermutationLMObjective(Objective):
    """XLNet's permutation language modelling with two-stream attention.

    Data side (per batch, so every epoch sees new orders): :func:`permutation_batch`.
    Loss side: the query-stream output at each target goes through XLNet's output layer
    (a bias plus the token table, tied) and cross-entropy against the original token.

    Args:
        encoder_config: the encoder's architecture: relative positions
            (``position_encoding="relative"``), ``E = D``, its memory length.
        tie_to: the encoder's token table, which the output layer is tied to.
        vocab: the tokenizer's ids.
        partial_k: ``K``: predict the last ``1/K`` of every order (XLNet: 6 or 7).
        span_based: sample span-based orders (see :func:`sample_order`).
        max_span: longest span when ``span_based``.
        bidirectional_context: see :func:`permutation_batch`.
        memory_segment: Transformer-XL recurrence in pre-training: the first
            ``memory_segment`` tokens of every row (at most half of the batch's row
            length) are the *previous segment*. They are
            encoded without gradient, and the encoder's memory of them is given to the
            pass over the rest of the row (the *current segment*), on which the
            permutation objective runs. ``0`` = no recurrence. Needs an encoder with
            ``memory_length > 0`` (the memory keeps its last ``memory_length`` positions).

    Batch keys: reads ``input_ids``, ``special_tokens_mask``, ``attention_mask``; writes
    ``attention_mask`` ``(B, L, L)``, ``query_positions``, ``query_attention_mask``,
    ``plm_labels``, ``order_ranks``; with ``memory_segment`` also ``memory_input_ids``,
    ``memory_token_type_ids`` and ``memory_mask`` (and the other ``(B, L)`` keys are cut
    to the current segment).
    Metrics: ``accuracy``, ``perplexity``, ``predictions``.
    """

    name = "plm"
    batch_keys = ("plm_labels",)

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        encoder_config: EncoderConfig,
        tie_to: nn.Embedding,
        partial_k: float = 6.0,
        span_based: bool = False,
        max_span: int = 5,
        bidirectional_context: bool = False,
        memory_segment: int = 0,
    ) -> None:
        super().__init__()
        config = encoder_config
        if not isinstance(config, XLNetConfig):
            raise ValueError(
                "permutation LM needs an encoder with position_encoding='relative': the query "
                "stream learns a token's position only through relative attention. Use the "
                "xlnet_tiny model config or set model.position_encoding=relative"
            )
        if vocab.vocab_size != config.vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{config.vocab_size}; build the encoder with the tokenizer's size"
            )
        if config.factorised:
            raise ValueError("permutation LM ties its output to the token table; use E = D")
        if partial_k < 1:
            raise ValueError(f"partial_k must be >= 1, got {partial_k}")
        if memory_segment < 0:
            raise ValueError(f"memory_segment must be >= 0, got {memory_segment}")
        if memory_segment and not config.memory_length:
            raise ValueError(
                f"memory_segment={memory_segment} needs an encoder that keeps memory; set "
                "model.memory_length (e.g. to the same number)"
            )
        self.memory_segment = memory_segment
        # The encoder's memory keeps the last memory_length positions of the segment.
        self.memory_kept = min(memory_segment, config.memory_length)
        self.table = tie_to
        self.output_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.partial_k = partial_k
        self.span_based = span_based
        self.max_span = max_span
        self.bidirectional_context = bidirectional_context

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if "special_tokens_mask" not in batch:
            raise ValueError(
                "permutation LM needs special_tokens_mask in the batch (the collator of "
                "ptm_core.data writes it); mark [CLS]/[SEP]/padding with 1"
            )
        if self.memory_segment:
            batch = self._split_segments(batch)
        padding = padding_of(batch)
        special = batch["special_tokens_mask"]
        return {
            **batch,
            **permutation_batch(
                batch["input_ids"],
                special,
                padding,
                generator,
                partial_k=self.partial_k,
                span_based=self.span_based,
                max_span=self.max_span,
                bidirectional_context=self.bidirectional_context,
            ),
        }

    def _split_segments(self, batch: Batch) -> Batch:
        """Cut every ``(B, L)`` tensor into previous | current segment.

        The cut is at ``memory_segment`` tokens, or at half the batch's row length when
        its rows are shorter than ``2 * memory_segment`` (batches are padded to their
        longest row), so there is always a current segment to predict.
        """
        ids = batch["input_ids"]
        length = ids.shape[1]
        cut = min(self.memory_segment, length // 2)
        if cut == 0:
            return batch
        kept = min(cut, self.memory_kept)
        padding = padding_of(batch)
        out: Batch = {}
        for key, value in batch.items():
            if value.dim() >= 2 and value.shape[:2] == ids.shape and key != "attention_mask":
                out[key] = value[:, cut:]
            else:
                out[key] = value
        out["attention_mask"] = padding[:, cut:].long()
        out["memory_input_ids"] = ids[:, :cut]
        out["memory_attention_mask"] = padding[:, :cut].long()
        out["memory_mask"] = padding[:, cut - kept : cut]
        types = batch.get("token_type_ids")
        out["memory_token_type_ids"] = (
            types[:, :cut] if types is not None else torch.zeros_like(ids[:, :cut])
        )
        return out

    def memory(self, encoder: TransformerEncoder, batch: Batch) -> tuple[Tensor, ...] | None:
        """The encoder's memory of the previous segment, without gradient (or ``None``)."""
        if "memory_input_ids" not in batch:
            return None
        with torch.no_grad():
            memory = encoder(
                batch["memory_input_ids"],
                attention_mask=batch["memory_attention_mask"],
                token_type_ids=batch["memory_token_type_ids"],
            ).memory
        return memory

    def logits(self, query_hidden: Tensor) -> Tensor:
        """``(..., D) -> (..., V)`` with the tied table and the output bias."""
        return F.linear(query_hidden, self.table.weight, self.output_bias)

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        query = encoder_output.query_hidden_state
        if query is None:
            raise ValueError(
                "the encoder returned no query stream; pass query_positions and "
                "query_attention_mask (the collate step writes them)"
            )
        labels = batch["plm_labels"]
        selected = labels != IGNORE_INDEX
        logits = self.logits(query[selected])  # (N, V)
        targets = labels[selected]
        if targets.numel() == 0:  # every current segment was padding
            loss = query.sum() * 0.0
        else:
            loss = F.cross_entropy(logits.float(), targets)
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "accuracy": accuracy(logits, targets),
                "perplexity": loss.detach().exp().clamp(max=math.exp(30)),
                "predictions": selected.sum().detach().float(),
            },
        )
