"""Pre-training objectives: each owns its data side and its loss side."""

from ptm_core.objectives.bart_noising import (
    BartDenoisingObjective,
    document_rotation,
    poisson_span_lengths,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)
from ptm_core.objectives.base import IGNORE_INDEX, Objective, ObjectiveOutput
from ptm_core.objectives.causal_lm import CausalLMObjective
from ptm_core.objectives.distilbert import DistilBertObjective
from ptm_core.objectives.electra import (
    ReplacedTokenDetectionObjective,
    electra_generator,
    sample_replacements,
)
from ptm_core.objectives.mass import MassObjective, mass_mask
from ptm_core.objectives.mix import MixOutput, ObjectiveMix
from ptm_core.objectives.mlm import (
    MaskedLMObjective,
    apply_replacements,
    mask_tokens,
    select_positions,
)
from ptm_core.objectives.nsp import NextSentenceObjective
from ptm_core.objectives.permutation_lm import (
    PermutationLMObjective,
    num_predictions,
    permutation_batch,
    sample_order,
    span_partition,
)
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective, pad_seq2seq
from ptm_core.objectives.sop import SentenceOrderObjective, build_sentence_order_examples
from ptm_core.objectives.span import SpanMaskingObjective, span_mask_tokens
from ptm_core.objectives.span_boundary import SpanBoundaryObjective
from ptm_core.objectives.t5_span import (
    T5SpanCorruptionObjective,
    random_spans_noise_mask,
    t5_reconstruct,
    t5_span_corruption,
)
from ptm_core.objectives.teacher import (
    MaskedLMTeacher,
    every_other_layer,
    init_student_from_teacher,
    soft_cross_entropy,
    uniform_layer_map,
)
from ptm_core.objectives.tinybert import TinyBertObjective
from ptm_core.objectives.unilm import UniLMObjective
from ptm_core.objectives.whole_word import (
    WholeWordMaskedLMObjective,
    WordBoundaries,
    whole_word_mask_tokens,
)

__all__ = [
    "IGNORE_INDEX",
    "BartDenoisingObjective",
    "CausalLMObjective",
    "DistilBertObjective",
    "MaskedLMObjective",
    "MaskedLMTeacher",
    "MassObjective",
    "MixOutput",
    "NextSentenceObjective",
    "Objective",
    "ObjectiveMix",
    "ObjectiveOutput",
    "PermutationLMObjective",
    "ReplacedTokenDetectionObjective",
    "SentenceOrderObjective",
    "Seq2SeqObjective",
    "SpanBoundaryObjective",
    "SpanMaskingObjective",
    "T5SpanCorruptionObjective",
    "TinyBertObjective",
    "UniLMObjective",
    "WholeWordMaskedLMObjective",
    "WordBoundaries",
    "apply_replacements",
    "build_sentence_order_examples",
    "document_rotation",
    "electra_generator",
    "every_other_layer",
    "init_student_from_teacher",
    "mask_tokens",
    "mass_mask",
    "num_predictions",
    "pad_seq2seq",
    "permutation_batch",
    "poisson_span_lengths",
    "random_spans_noise_mask",
    "sample_order",
    "sample_replacements",
    "select_positions",
    "sentence_permutation",
    "soft_cross_entropy",
    "span_mask_tokens",
    "span_partition",
    "t5_reconstruct",
    "t5_span_corruption",
    "text_infilling",
    "token_deletion",
    "token_masking",
    "uniform_layer_map",
    "whole_word_mask_tokens",
]
