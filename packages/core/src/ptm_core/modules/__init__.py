"""Building blocks shared by every encoder and decoder in ptm."""

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import (
    block_diagonal_mask,
    causal_mask,
    padding_to_visibility,
    to_sdpa_mask,
)
from ptm_core.modules.embeddings import TextEmbeddings
from ptm_core.modules.feed_forward import ACTIVATIONS, FeedForward, get_activation

__all__ = [
    "ACTIVATIONS",
    "FeedForward",
    "MultiHeadSelfAttention",
    "TextEmbeddings",
    "block_diagonal_mask",
    "causal_mask",
    "get_activation",
    "padding_to_visibility",
    "to_sdpa_mask",
]
