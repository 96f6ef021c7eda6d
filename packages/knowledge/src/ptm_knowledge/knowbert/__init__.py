"""KnowBERT (Peters et al., 2019): entity linkers and knowledge attention and
recontextualisation (KAR) inserted between the layers of a pre-trained encoder."""

from ptm_knowledge.knowbert.candidates import AliasCandidates, CandidateTransform
from ptm_knowledge.knowbert.kar import (
    KnowBertLinker,
    KnowledgeAttentionRecontextualization,
    PriorLinkingScorer,
    SpanAttentionLayer,
)
from ptm_knowledge.knowbert.linking_objective import EntityLinkingObjective
from ptm_knowledge.knowbert.model import KarSpec, KnowBertEncoder, KnowBertOutput
from ptm_knowledge.knowbert.span_extractor import SelfAttentiveSpanExtractor

__all__ = [
    "AliasCandidates",
    "CandidateTransform",
    "EntityLinkingObjective",
    "KarSpec",
    "KnowBertEncoder",
    "KnowBertLinker",
    "KnowBertOutput",
    "KnowledgeAttentionRecontextualization",
    "PriorLinkingScorer",
    "SelfAttentiveSpanExtractor",
    "SpanAttentionLayer",
]
