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
    encoder: TransformerEncoder,
    input_ids: Tensor,
    attention_mask: Tensor | None = None,
    *,
    position_ids: Tensor | None = None,
    token_type_ids: Tensor | None = None,
) -> tuple[Tensor, ...]:
    """Each layer's attention probabilities ``(B, h, L, L)`` (rows: queries, sum 1).

    Args:
        encoder: the encoder.
        input_ids: ``(B, L)``.
        attention_mask: ``(B, L)`` padding or ``(B, L, L)`` visibility (K-BERT's visible
            matrix): a query's probabilities cover only the keys it may see.
        position_ids, token_type_ids: ``(B, L)``, as the encoder reads them (K-BERT's soft
            positions).

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
        out = encoder(
            input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            output_attention_scores=True,
        )
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
            ``self`` (on the query's own position), when the caller marked keys,
            ``marked`` (on those: a word list) and, when it gave knowledge tokens,
            ``knowledge`` (on K-BERT's branch tokens or ERNIE-THU's entity-aligned
            tokens), ``rest`` (on every other key: ``cls + sep + knowledge + rest = 1``
            per query) and ``knowledge_seen`` (``knowledge`` averaged over the queries
            that are no knowledge token themselves and may see one: how much the
            sentence reads the knowledge; K-BERT's visible matrix shows a branch to its
            subject's words only).
        uniform_entropy: the mean entropy of uniform attention over each query's visible
            keys (``log n``), the ceiling to read ``entropy`` against.
        queries: real query tokens averaged over.
        seeing_knowledge: of those, the queries ``knowledge_seen`` averages over.
        uniform_knowledge_seen: what ``knowledge_seen`` would be under uniform attention
            over each query's visible keys (the share of knowledge tokens among them).
    """

    tables: dict[str, Tensor]
    uniform_entropy: float
    queries: int
    seeing_knowledge: int = 0
    uniform_knowledge_seen: float = 0.0


def key_masses(layer: Tensor, keys: dict[str, Tensor], real: Tensor) -> dict[str, Tensor]:
    """Per query, the attention mass on each group of keys, and on the ``rest`` of them.

    Args:
        layer: ``(B, h, L, L)`` probabilities of one layer.
        keys: name -> ``(B, L)`` bool key groups (disjoint: [CLS], [SEP], knowledge).
        real: ``(B, L)`` bool real tokens.

    Returns:
        name -> ``(B, h, L)`` masses, plus ``rest``: the mass on real keys in no group
        (summed over those keys, not ``1 -`` the others, so the sum is a check).
    """
    out = {name: (layer * k[:, None, None, :]).sum(-1) for name, k in keys.items()}
    other = real.clone()
    for k in keys.values():
        other &= ~k
    out["rest"] = (layer * other[:, None, None, :]).sum(-1)
    return out


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
        self.seeing = 0
        self.uniform_knowledge = 0.0

    def add(
        self,
        probs: Sequence[Tensor],
        input_ids: Tensor,
        attention_mask: Tensor,
        marked: Tensor | None = None,
        *,
        knowledge: Tensor | None = None,
        visibility: Tensor | None = None,
    ) -> None:
        """Add one batch.

        Args:
            probs: from :func:`attention_probabilities`.
            input_ids: ``(B, L)``.
            attention_mask: ``(B, L)`` real tokens.
            marked: ``(B, L)`` bool keys whose received mass is tracked as ``marked``.
            knowledge: ``(B, L)`` bool knowledge tokens (K-BERT branches, ERNIE-THU
                aligned tokens): adds ``knowledge``, ``rest`` and ``knowledge_seen``.
            visibility: ``(B, L, L)`` the visible matrix the probabilities were computed
                under (uniform entropy and ``knowledge_seen`` count visible keys only).
        """
        real = attention_mask.bool()  # (B, L)
        see = real[:, None, :] & real[:, :, None] if visibility is None else visibility.bool()
        keys = {
            "cls": (input_ids == self.cls_id) & real,
            "sep": (input_ids == self.sep_id) & real,
        }
        if knowledge is not None:
            keys["knowledge"] = knowledge.bool() & real & ~keys["cls"] & ~keys["sep"]
        weight = real.float()[:, None, :]  # (B, 1, L) queries that count
        seeing = torch.zeros_like(real)
        if knowledge is not None:
            # sentence tokens that may see a knowledge token (not the knowledge tokens)
            visible = (see & keys["knowledge"][:, None, :]).any(-1)
            seeing = visible & real & ~keys["knowledge"]  # (B, L) queries
        names = [*STATISTICS, *keys, *(["rest", "knowledge_seen"] if knowledge is not None else [])]
        rows: dict[str, list[Tensor]] = {name: [] for name in names}
        for layer in probs:  # (B, h, L, L)
            per_query = {
                "entropy": entropy(layer),
                "self": layer.diagonal(dim1=-2, dim2=-1),
                **key_masses(layer, keys, real),
            }  # each (B, h, L)
            if knowledge is None:
                per_query.pop("rest")
            if marked is not None:
                per_query["marked"] = (layer * (marked.bool() & real)[:, None, None, :]).sum(-1)
            for name, value in per_query.items():
                rows.setdefault(name, []).append((value * weight).sum(dim=(0, 2)))  # (h,)
            if knowledge is not None:
                seen = per_query["knowledge"] * seeing.float()[:, None, :]
                rows["knowledge_seen"].append(seen.sum(dim=(0, 2)))
        for name, values in rows.items():
            total = torch.stack(values).double()
            self.sums[name] = self.sums[name] + total if name in self.sums else total
        visible = see.sum(dim=-1)[real].clamp(min=1).double()
        self.uniform += float(visible.log().sum())
        self.queries += int(real.sum())
        self.seeing += int(seeing.sum())
        if knowledge is not None:
            share = (see & keys["knowledge"][:, None, :]).sum(-1) / see.sum(-1).clamp(min=1)
            self.uniform_knowledge += float(share[seeing].double().sum())

    def result(self) -> AttentionStatistics:
        if not self.queries:
            raise ValueError("no real token was seen; give at least one non-empty sentence")
        mean = {
            name: total / (max(self.seeing, 1) if name == "knowledge_seen" else self.queries)
            for name, total in self.sums.items()
        }
        return AttentionStatistics(
            mean,
            self.uniform / self.queries,
            self.queries,
            self.seeing,
            self.uniform_knowledge / max(self.seeing, 1),
        )
