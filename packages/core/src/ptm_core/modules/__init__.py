"""Building blocks shared by every encoder and decoder in ptm."""

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import (
    UNILM_MASK_KINDS,
    bidirectional_mask,
    block_diagonal_mask,
    causal_mask,
    left_to_right_mask,
    memory_visibility,
    padding_to_visibility,
    permutation_masks,
    right_to_left_mask,
    seq2seq_mask,
    to_sdpa_mask,
    unilm_mask,
)
from ptm_core.modules.cross_attention import MultiHeadCrossAttention, memory_mask
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import (
    ACTIVATIONS,
    FeedForward,
    GatedFeedForward,
    get_activation,
)
from ptm_core.modules.initialization import init_bert_weights
from ptm_core.modules.norms import RMSNorm
from ptm_core.modules.positions import RelativePositionBias, relative_position_bucket
from ptm_core.modules.relative_attention import (
    RelativeMultiHeadAttention,
    relative_index,
    sinusoid_relative_positions,
)
from ptm_core.modules.scalar_mix import ScalarMix

__all__ = [
    "ACTIVATIONS",
    "UNILM_MASK_KINDS",
    "FeedForward",
    "GatedFeedForward",
    "MultiHeadCrossAttention",
    "MultiHeadSelfAttention",
    "RMSNorm",
    "RelativeMultiHeadAttention",
    "RelativePositionBias",
    "ScalarMix",
    "TextEmbeddings",
    "bidirectional_mask",
    "block_diagonal_mask",
    "causal_mask",
    "get_activation",
    "init_bert_weights",
    "left_to_right_mask",
    "memory_mask",
    "memory_visibility",
    "padding_to_visibility",
    "permutation_masks",
    "relative_index",
    "relative_position_bucket",
    "right_to_left_mask",
    "seq2seq_mask",
    "sinusoid_relative_positions",
    "to_sdpa_mask",
    "unilm_mask",
]
