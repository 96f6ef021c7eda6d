"""Attention analysis: every head's attention probabilities, their entropy and where the
mass goes (Clark et al., 2019, "What Does BERT Look At?").

ptm's attention runs through fused SDPA kernels, which never materialise the probabilities.
The encoder's explicit path (``output_attention_scores=True``, the one TinyBERT's
distillation reads) returns each layer's pre-softmax scores with the layer's own mask
folded in (padding, K-BERT visibility, ModernBERT's local window, T5's position bias) and
the queries and keys as the layer made them (rotary positions included); a softmax over the
keys gives the probabilities. XLNet's relative two-stream attention has no such path and is
refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.encoders.xlnet import XLNetEncoder

#: The statistics :func:`attention_statistics` computes per layer and head.
STATISTICS = ("entropy", "cls", "sep", "self")


def attention_probabilities(
    encoder: TransformerEncoder, input_ids: Tensor, attention_mask: Tensor | None = None
) -> tuple[Tensor, ...]:
    """Each layer's attention probabilities ``(B, h, L, L)`` (rows: queries, sum 1).

    Raises:
        ValueError: the encoder has no explicit attention path (XLNet; names the family).
    """
    if isinstance(encoder, XLNetEncoder) or not isinstance(encoder, TransformerEncoder):
        name = type(encoder).__name__
        raise ValueError(
            f"attention analysis reads the attention of TransformerEncoder layers; {name} "
            "(XLNet/Transformer-XL relative two-stream attention) has no explicit attention path"
        )
    with torch.no_grad():
        out = encoder(input_ids, attention_mask=attention_mask, output_attention_scores=True)
    assert out.attention_scores is not None
    return tuple(scores.float().softmax(dim=-1) for scores in out.attention_scores)


def entropy(probs: Tensor) -> Tensor:
    """Entropy in nats of each distribution over the last dimension (``0 log 0 = 0``)."""
    return -torch.where(probs > 0, probs * probs.log(), torch.zeros_like(probs)).sum(dim=-1)


@dataclass
class AttentionStatistics:
    """Per layer and head, averages over the real query tokens of some sentences.

    Attributes:
        tables: ``(layers, heads)`` tables by name: ``entropy`` (mean entropy in nats of a
            query's attention), ``cls`` (mean mass on ``[CLS]``), ``sep`` (on ``[SEP]``),
            ``self`` (on the query's own position) and, when the caller marked keys,
            ``marked`` (on those: knowledge tokens, a word list).
        uniform_entropy: the mean entropy of uniform attention over each query's visible
            keys (``log n``), the ceiling to read ``entropy`` against.
        queries: real query tokens averaged over.
    """

    tables: dict[str, Tensor]
    uniform_entropy: float
    queries: int


class AttentionAccumulator:
    """Sums :class:`AttentionStatistics` over batches.

    Args:
        cls_id, sep_id: the special ids.
    """

    def __init__(self, cls_id: int, sep_id: int) -> None:
        self.cls_id, self.sep_id = cls_id, sep_id
        self.sums: dict[str, Tensor] = {}
        self.uniform = 0.0
        self.queries = 0

    def add(
        self,
        probs: Sequence[Tensor],
        input_ids: Tensor,
        attention_mask: Tensor,
        marked: Tensor | None = None,
    ) -> None:
        """Add one batch: ``probs`` from :func:`attention_probabilities`; ``marked`` an
        optional ``(B, L)`` bool of keys whose received mass is tracked."""
        real = attention_mask.bool()  # (B, L)
        keys = {
            "cls": (input_ids == self.cls_id) & real,
            "sep": (input_ids == self.sep_id) & real,
        }
        if marked is not None:
            keys["marked"] = marked.bool() & real
        weight = real.float()[:, None, :]  # (B, 1, L) queries that count
        rows: dict[str, list[Tensor]] = {name: [] for name in [*STATISTICS, *keys]}
        for layer in probs:  # (B, h, L, L)
            per_query = {
                "entropy": entropy(layer),
                "self": layer.diagonal(dim1=-2, dim2=-1),
                **{name: (layer * k[:, None, None, :]).sum(-1) for name, k in keys.items()},
            }  # each (B, h, L)
            for name, value in per_query.items():
                rows[name].append((value * weight).sum(dim=(0, 2)))  # (h,)
        for name, values in rows.items():
            total = torch.stack(values).double()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        visible = real.sum(dim=1, keepdim=True).expand_as(real)[real].double()
        self.uniform += float(visible.log().sum())
        self.queries += int(real.sum())

    def result(self) -> AttentionStatistics:
        if not self.queries:
            raise ValueError("no real token was seen; give at least one non-empty sentence")
        mean = {name: total / self.queries for name, total in self.sums.items()}
        return AttentionStatistics(mean, self.uniform / self.queries, self.queries)
