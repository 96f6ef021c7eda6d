"""In-memory pre-training examples (segment pairs or single segments) from tokenised documents.

Thin wrappers over the planned layouts of :mod:`ptm_core.data.layouts`, which the prepared
(memory-mapped) path uses too.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ptm_core.data.layouts import (
    SegmentPairRows,
    SegmentRows,
    plan_segment_pairs,
    plan_single_segments,
    trim_counts,
)
from ptm_core.data.token_store import InMemoryTokenStore
from ptm_core.tokenization import VocabInfo

# A document as lists of word-piece ids, one list per sentence.
TokenizedDocument = Sequence[Sequence[int]]
Example = dict[str, Any]


def truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, one token at a time from a random end, in place (BERT).

    The same random draws as trimming token by token (:func:`~ptm_core.data.layouts.
    trim_counts`), but each list is cut once: O(len(a) + len(b)), where deleting from the
    front one token at a time was quadratic on a long sentence.
    """
    a_front, a_back, b_front, b_back = trim_counts(len(a), len(b), max_tokens, rng)
    for segment, front, back in ((a, a_front, a_back), (b, b_front, b_back)):
        if back:
            del segment[len(segment) - back :]
        if front:
            del segment[:front]


def build_segment_pair_examples(
    documents: Sequence[TokenizedDocument],
    vocab: VocabInfo,
    max_length: int,
    rng: random.Random,
    *,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> list[Example]:
    """Every NSP pair of in-memory documents; see :func:`~ptm_core.data.layouts.plan_segment_pairs`.

    Returns:
        Examples with ``input_ids``, ``token_type_ids``, ``special_tokens_mask``,
        ``next_sentence_label`` (1 = random B) and ``meta_documents`` ``(a_doc, b_doc)``
        (indices among the non-empty documents).
    """
    store = InMemoryTokenStore(documents)
    plan = plan_segment_pairs(
        store,
        max_length,
        rng,
        random_next_prob=random_next_prob,
        short_seq_prob=short_seq_prob,
    )
    return list(SegmentPairRows(store, plan, vocab, label_key="next_sentence_label"))


def build_single_segment_examples(
    documents: Sequence[TokenizedDocument],
    vocab: VocabInfo,
    max_length: int,
) -> list[Example]:
    """Every DOC-SENTENCES row of in-memory documents; see
    :func:`~ptm_core.data.layouts.plan_single_segments`.

    Returns:
        Examples with ``input_ids``, ``token_type_ids``, ``special_tokens_mask``.
    """
    store = InMemoryTokenStore(documents)
    return list(SegmentRows(store, plan_single_segments(store, max_length), vocab))
