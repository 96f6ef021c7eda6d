"""KnowBERT's knowledge attention and recontextualisation (KAR) and its entity linker.

Peters et al., 2019, "Knowledge Enhanced Contextual Word Representations", section 3; the
construction follows the released code (allenai/kb, ``kb/knowbert.py``:
``DotAttentionWithPrior``, ``EntityDisambiguator``, ``SolderedKG``;
``kb/span_attention_layer.py``), layer by layer, so its weights load name by name
(``tests/knowledge/test_knowbert_golden.py`` checks it against a transcription).

Entity table rows: ``0`` is padding (a candidate slot with no entity), ``1`` is the null
entity (``@@NULL@@``), the KG's entities follow from row ``2`` (:data:`FIRST_ENTITY_ROW`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from ptm_core.encoders.layers import TransformerLayer
from ptm_core.modules import FeedForward, MultiHeadSelfAttention
from ptm_core.modules.cross_attention import MultiHeadCrossAttention
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.initialization import init_bert_weights
from ptm_knowledge.knowbert.span_extractor import SelfAttentiveSpanExtractor

PADDING_ROW = 0
NULL_ROW = 1
FIRST_ENTITY_ROW = 2
#: The score of a padded candidate slot (the released code's ``masked_fill(-10000.0)``).
INVALID_CANDIDATE_SCORE = -10000.0
#: LayerNorm epsilon of the KAR's own norms (the released code's ``BertLayerNorm(eps=1e-5)``).
KAR_NORM_EPS = 1e-5
#: LayerNorm epsilon inside the span attention layer (BERT's sub-layers, 1e-12).
BERT_NORM_EPS = 1e-12


@dataclass
class LinkerOutput:
    """What the entity linker computes for one KG.

    Attributes:
        linking_scores: ``(B, S, C)`` candidate scores, ``-10000`` at padded slots.
        weighted_entity_embeddings: ``(B, S, E)`` the softmax(score)-weighted candidate
            embeddings (the null embedding for a span with every score under the threshold).
        projected_span_representations: ``(B, S, E)`` pooled, normalised mention spans.
        projected_states: ``(B, L, E)`` the contextual states projected to the KG width.
    """

    linking_scores: Tensor
    weighted_entity_embeddings: Tensor
    projected_span_representations: Tensor
    projected_states: Tensor


class PriorLinkingScorer(nn.Module):
    """Score each candidate from its span-entity dot product and its alias prior.

    ``s = (m . e) / sqrt(E)``; ``score = W2 relu(W1 [s ; p] + b1) + b2`` (a two-layer MLP over
    the scaled dot product and the prior ``p``); padded candidates get ``-10000``. The weighted
    entity embedding is ``sum_c softmax(score)_c e_c``; with ``threshold`` (the margin loss's
    decode threshold) scores under it get no weight, and a span with none above it takes
    the null embedding (``DotAttentionWithPrior`` in allenai/kb).

    Args:
        hidden: the MLP's width (100 in the paper).
        threshold: the weighting threshold, or ``None``.
        null_embedding: ``(E,)`` the null entity's vector (needed with ``threshold``).
    """

    null_embedding: Tensor

    def __init__(
        self,
        hidden: int = 100,
        threshold: float | None = None,
        null_embedding: Tensor | None = None,
    ) -> None:
        super().__init__()
        self.out_layer_1 = nn.Linear(2, hidden)
        self.out_layer_2 = nn.Linear(hidden, 1)
        self.threshold = threshold
        if threshold is not None and null_embedding is None:
            raise ValueError("a weighting threshold needs the null entity's embedding")
        self.register_buffer(
            "null_embedding",
            null_embedding.detach().clone() if null_embedding is not None else torch.zeros(0),
        )

    def forward(
        self, spans: Tensor, candidates: Tensor, priors: Tensor, valid: Tensor
    ) -> tuple[Tensor, Tensor]:
        """``spans (B, S, E)``, ``candidates (B, S, C, E)``, ``priors (B, S, C)``, ``valid
        (B, S, C)`` bool -> ``(linking_scores (B, S, C), weighted (B, S, E))``."""
        dot = (spans.unsqueeze(-2) * candidates).sum(-1) / math.sqrt(candidates.shape[-1])
        features = torch.stack([dot, priors.to(dot.dtype)], dim=-1)  # (B, S, C, 2)
        scores = self.out_layer_2(torch.relu(self.out_layer_1(features))).squeeze(-1)
        scores = scores.masked_fill(~valid, INVALID_CANDIDATE_SCORE)
        return scores, self.weighted_embeddings(scores, candidates)

    def weighted_embeddings(self, scores: Tensor, candidates: Tensor) -> Tensor:
        """``sum_c softmax(scores)_c candidates_c`` ``(B, S, E)`` (see the class docstring)."""
        below = None
        if self.threshold is not None:
            below = scores < self.threshold
            scores = scores.masked_fill(below, INVALID_CANDIDATE_SCORE)
        weights = torch.softmax(scores, dim=-1)  # (B, S, C)
        weighted = (weights.unsqueeze(-1) * candidates).sum(dim=2)
        if below is not None:
            none_above = below.all(dim=-1, keepdim=True)  # (B, S, 1)
            weighted = torch.where(none_above, self.null_embedding.to(weighted.dtype), weighted)
        return weighted


class KnowBertLinker(nn.Module):
    """KnowBERT's entity linker over one KG (the released code's ``EntityDisambiguator``).

    Contextual states ``H`` ``(B, L, D)`` are projected to the KG width, ``H^proj = H W1 +
    b1``; each candidate mention span is pooled from them by self-attention and normalised
    (``LN``); with ``span_encoder_layers``, BERT layers of self-attention among the spans
    follow (the released code's ``span_encoder_config``, used by its final WordNet, Wiki and
    W+W models); each candidate's frozen KG embedding is normalised (``LN``); the
    :class:`PriorLinkingScorer` scores candidates and forms the weighted entity embedding.

    Args:
        hidden_size: ``D``.
        entity_table: ``(N, E)`` frozen entity embeddings, rows as in the module docstring.
        scorer_hidden: the scorer MLP's width.
        threshold: see :class:`PriorLinkingScorer` (the margin loss's decode threshold).
        span_encoder_layers: BERT layers over the spans (0: none).
        span_encoder_heads, span_encoder_intermediate: their heads and feed-forward width.
        dropout, attention_dropout: the span encoder's rates.
    """

    entity_table: Tensor

    def __init__(
        self,
        hidden_size: int,
        entity_table: Tensor,
        *,
        scorer_hidden: int = 100,
        threshold: float | None = None,
        span_encoder_layers: int = 0,
        span_encoder_heads: int = 4,
        span_encoder_intermediate: int | None = None,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if entity_table.dim() != 2 or entity_table.shape[0] < FIRST_ENTITY_ROW:
            raise ValueError(
                "entity_table must be (rows, dim) with row 0 = padding and row 1 = null, got "
                f"{tuple(entity_table.shape)}"
            )
        entity_dim = int(entity_table.shape[1])
        self.register_buffer("entity_table", entity_table.detach().float().clone())
        self.span_extractor = SelfAttentiveSpanExtractor(entity_dim)
        self.bert_to_kg_projector = nn.Linear(hidden_size, entity_dim)
        self.projected_span_layer_norm = nn.LayerNorm(entity_dim, eps=KAR_NORM_EPS)
        self.kg_layer_norm = nn.LayerNorm(entity_dim, eps=KAR_NORM_EPS)
        null = self.entity_table[NULL_ROW] if threshold is not None else None
        self.scorer = PriorLinkingScorer(scorer_hidden, threshold, null)
        self.span_encoder = nn.ModuleList(
            TransformerLayer(
                MultiHeadSelfAttention(entity_dim, span_encoder_heads, attention_dropout),
                FeedForward(entity_dim, span_encoder_intermediate or 4 * entity_dim),
                entity_dim,
                dropout,
                BERT_NORM_EPS,
            )
            for _ in range(span_encoder_layers)
        )
        self.hidden_size = hidden_size
        self.entity_dim = entity_dim

    def forward(
        self, hidden: Tensor, spans: Tensor, entities: Tensor, priors: Tensor
    ) -> LinkerOutput:
        """``hidden (B, L, D)``, ``spans (B, S, 2)``, ``entities (B, S, C)`` table rows,
        ``priors (B, S, C)`` -> :class:`LinkerOutput`."""
        candidates = self.kg_layer_norm(self.entity_table[entities])  # (B, S, C, E)
        projected = self.bert_to_kg_projector(hidden)  # (B, L, E)
        pooled = self.projected_span_layer_norm(self.span_extractor(projected, spans))
        if len(self.span_encoder):
            padded = spans[..., 0] <= -1  # (B, S); additive, as BERT's extended mask
            mask = padded.to(pooled.dtype)[:, None, None, :] * -10000.0
            for layer in self.span_encoder:
                pooled = layer(pooled, mask)
        scores, weighted = self.scorer(pooled, candidates, priors, entities > PADDING_ROW)
        return LinkerOutput(scores, weighted, pooled, projected)


class SpanAttentionLayer(nn.Module):
    """A BERT layer whose attention reads the entity-enhanced spans: word-to-entity-span
    attention (queries from the projected tokens, keys and values from the spans; the
    released code's ``SpanAttentionLayer``), residual + LayerNorm, feed-forward, residual +
    LayerNorm.

    Args:
        size: width ``E`` (the KG's).
        num_heads: attention heads (must divide ``E``).
        intermediate_size: feed-forward width.
        dropout: sub-layer output dropout.
        attention_dropout: dropout on the attention probabilities (it drops whole spans).
        activation: feed-forward activation (``gelu``: BERT's erf GELU).
    """

    def __init__(
        self,
        size: int,
        num_heads: int,
        intermediate_size: int,
        *,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation: str = "gelu",
    ) -> None:
        super().__init__()
        self.attention = MultiHeadCrossAttention(size, num_heads, attention_dropout)
        self.attention_norm = nn.LayerNorm(size, eps=BERT_NORM_EPS)
        self.feed_forward = FeedForward(size, intermediate_size, activation)
        self.ffn_norm = nn.LayerNorm(size, eps=BERT_NORM_EPS)
        self.dropout = Dropout(dropout)

    def forward(self, tokens: Tensor, spans: Tensor, span_mask: Tensor) -> Tensor:
        """``tokens (B, L, E)``, ``spans (B, S, E)``, ``span_mask (B, S)`` bool -> ``(B, L, E)``.

        The mask is additive (``-10000`` at padded spans, as BERT's extended mask), so a row
        with no span attends uniformly to its padding, as the released code does.
        """
        additive = (~span_mask).to(tokens.dtype)[:, None, None, :] * -10000.0  # (B, 1, 1, S)
        attended = self.attention(tokens, spans, additive)
        hidden = self.attention_norm(tokens + self.dropout(attended))
        return self.ffn_norm(hidden + self.dropout(self.feed_forward(hidden)))


@dataclass
class KarOutput:
    """One KAR's result: the recontextualised states and what its linker scored."""

    hidden: Tensor
    linker: LinkerOutput


class KnowledgeAttentionRecontextualization(nn.Module):
    """KnowBERT's KAR for one KG (Peters et al., 2019, section 3.3; ``SolderedKG``).

    Given contextual states ``H_i`` ``(B, L, D)`` after layer ``i`` and the candidate
    mentions of one KG:

    1. the :class:`KnowBertLinker` projects ``H_i`` to ``H^proj`` (width ``E``), pools the
       mention spans ``S``, scores the candidates (prior + span-entity dot product) and
       forms the weighted entity embeddings ``~e``;
    2. the spans are updated, ``S^e = LN(S + dropout(~e))``;
    3. the tokens attend to the entity-enhanced spans, ``H'^proj = SpanAttention(H^proj,
       S^e)`` (:class:`SpanAttentionLayer`);
    4. back to ``D``: ``H'_i = LN(H_i + dropout(H'^proj W2 + b2))``. ``W2`` starts as the
       pseudo-inverse of the projection ``W1`` (``init_inverse``, the paper's "initialized
       ... so that ... is the identity" in the linear part).

    Args:
        hidden_size: ``D``.
        entity_table: ``(N, E)`` frozen KG embeddings (rows: see the module docstring).
        num_heads: span attention heads (4 in the paper; must divide ``E``).
        intermediate_size: span attention feed-forward width (``4 E`` when ``None``).
        scorer_hidden: the linker's MLP width.
        threshold: the linker's weighting threshold (``None``: plain softmax weights).
        span_encoder_layers: BERT layers among the linker's spans (see
            :class:`KnowBertLinker`; the same heads and feed-forward width as the span
            attention).
        dropout, attention_dropout: the BERT rates (0.1).
        init_inverse: initialise ``W2`` as the pseudo-inverse of ``W1``.
        initializer_range: std of the normal init of the new weights.

    Shapes:
        ``forward(hidden (B, L, D), spans (B, S, 2), entities (B, S, C), priors (B, S, C))``
        -> :class:`KarOutput` with ``hidden (B, L, D)``.
    """

    def __init__(
        self,
        hidden_size: int,
        entity_table: Tensor,
        *,
        num_heads: int = 4,
        intermediate_size: int | None = None,
        scorer_hidden: int = 100,
        threshold: float | None = None,
        span_encoder_layers: int = 0,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        init_inverse: bool = True,
        initializer_range: float = 0.02,
    ) -> None:
        super().__init__()
        entity_dim = int(entity_table.shape[-1])
        if entity_dim % num_heads:
            raise ValueError(
                f"the KG's embedding width {entity_dim} is not divisible by num_heads={num_heads}; "
                "pick a head count that divides it (knowbert.kgs.<name>.num_heads)"
            )
        self.linker = KnowBertLinker(
            hidden_size,
            entity_table,
            scorer_hidden=scorer_hidden,
            threshold=threshold,
            span_encoder_layers=span_encoder_layers,
            span_encoder_heads=num_heads,
            span_encoder_intermediate=intermediate_size,
            dropout=dropout,
            attention_dropout=attention_dropout,
        )
        self.weighted_entity_layer_norm = nn.LayerNorm(entity_dim, eps=KAR_NORM_EPS)
        self.span_attention_layer = SpanAttentionLayer(
            entity_dim,
            num_heads,
            intermediate_size or 4 * entity_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
        )
        self.output_layer_norm = nn.LayerNorm(hidden_size, eps=KAR_NORM_EPS)
        self.kg_to_bert_projection = nn.Linear(entity_dim, hidden_size)
        self.dropout = Dropout(dropout)
        init_bert_weights(self, initializer_range)
        if init_inverse:
            self.init_inverse_projection()

    @torch.no_grad()
    def init_inverse_projection(self) -> None:
        """``W2 = (W1^T W1)^-1 W1^T``, ``b2 = W2 b1``: the released code's initialisation
        of the projection back (computed in float64)."""
        w = self.linker.bert_to_kg_projector.weight.double()  # (E, D)
        b = self.linker.bert_to_kg_projector.bias.double()
        inverse = torch.linalg.inv(w.T @ w) @ w.T if w.shape[0] >= w.shape[1] else None
        if inverse is None:  # E < D: the Moore-Penrose pseudo-inverse of W1
            inverse = torch.linalg.pinv(w)
        self.kg_to_bert_projection.weight.copy_(inverse.to(self.kg_to_bert_projection.weight))
        self.kg_to_bert_projection.bias.copy_((inverse @ b).to(self.kg_to_bert_projection.bias))

    def forward(self, hidden: Tensor, spans: Tensor, entities: Tensor, priors: Tensor) -> KarOutput:
        linked = self.linker(hidden, spans, entities, priors)
        enhanced = self.weighted_entity_layer_norm(
            linked.projected_span_representations + self.dropout(linked.weighted_entity_embeddings)
        )  # (B, S, E)
        span_mask = spans[..., 0] > -1  # (B, S)
        recontextualised = self.span_attention_layer(linked.projected_states, enhanced, span_mask)
        back = self.kg_to_bert_projection(recontextualised)  # (B, L, D)
        return KarOutput(self.output_layer_norm(hidden + self.dropout(back)), linked)

    def linker_parameters(self) -> list[nn.Parameter]:
        """What stage 1 trains (the linker; the released code's ``unfreeze('entity_linking')``)."""
        return list(self.linker.parameters())


__all__ = [
    "FIRST_ENTITY_ROW",
    "INVALID_CANDIDATE_SCORE",
    "NULL_ROW",
    "PADDING_ROW",
    "KarOutput",
    "KnowBertLinker",
    "KnowledgeAttentionRecontextualization",
    "LinkerOutput",
    "PriorLinkingScorer",
    "SpanAttentionLayer",
]
