"""Pre-training objectives: each owns its data side and its loss side."""

from ptm_core.objectives.base import IGNORE_INDEX, Objective, ObjectiveOutput
from ptm_core.objectives.causal_lm import CausalLMObjective
from ptm_core.objectives.distillation import (
    DistilBertObjective,
    MaskedLMTeacher,
    TinyBertObjective,
    every_other_layer,
    init_student_from_teacher,
    soft_cross_entropy,
    uniform_layer_map,
)
from ptm_core.objectives.electra import (
    ReplacedTokenDetectionObjective,
    electra_generator,
    sample_replacements,
)
from ptm_core.objectives.mix import MixOutput, ObjectiveMix
from ptm_core.objectives.mlm import (
    MaskedLMObjective,
    apply_replacements,
    mask_tokens,
    select_positions,
)
from ptm_core.objectives.nsp import NextSentenceObjective
from ptm_core.objectives.sop import SentenceOrderObjective, build_sentence_order_examples
from ptm_core.objectives.span import SpanMaskingObjective, span_mask_tokens
from ptm_core.objectives.span_boundary import SpanBoundaryObjective
from ptm_core.objectives.unilm import UniLMObjective
from ptm_core.objectives.whole_word import (
    WholeWordMaskedLMObjective,
    WordBoundaries,
    whole_word_mask_tokens,
)

__all__ = [
    "IGNORE_INDEX",
    "CausalLMObjective",
    "DistilBertObjective",
    "MaskedLMObjective",
    "MaskedLMTeacher",
    "MixOutput",
    "NextSentenceObjective",
    "Objective",
    "ObjectiveMix",
    "ObjectiveOutput",
    "ReplacedTokenDetectionObjective",
    "SentenceOrderObjective",
    "SpanBoundaryObjective",
    "SpanMaskingObjective",
    "TinyBertObjective",
    "UniLMObjective",
    "WholeWordMaskedLMObjective",
    "WordBoundaries",
    "apply_replacements",
    "build_sentence_order_examples",
    "electra_generator",
    "every_other_layer",
    "init_student_from_teacher",
    "mask_tokens",
    "sample_replacements",
    "select_positions",
    "soft_cross_entropy",
    "span_mask_tokens",
    "uniform_layer_map",
    "whole_word_mask_tokens",
]
