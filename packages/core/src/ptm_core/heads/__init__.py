"""Output heads: they map encoder states to logits and never compute a loss."""

from ptm_core.heads.crf import LinearChainCRF
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.heads.sentence_pair import Pooler, SentencePairHead
from ptm_core.heads.span_boundary import SpanBoundaryHead
from ptm_core.heads.tasks import (
    MultipleChoiceHead,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
)
from ptm_core.heads.token_discriminator import TokenDiscriminatorHead

__all__ = [
    "LinearChainCRF",
    "MaskedLMHead",
    "MultipleChoiceHead",
    "Pooler",
    "QuestionAnsweringHead",
    "SentencePairHead",
    "SequenceClassificationHead",
    "SpanBoundaryHead",
    "TokenClassificationHead",
    "TokenDiscriminatorHead",
]
