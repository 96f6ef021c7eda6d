"""Sentence-order prediction (ALBERT)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch.nn.functional as F

from ptm_core.data.layouts import (
    PAIR_COLUMNS,
    SegmentPairRows,
    cached_plan,
    concat_plan,
    draw_swaps,
    iter_segment_pairs,
)
from ptm_core.data.segments import TokenizedDocument
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.sentence_pair import SentencePairHead
from ptm_core.objectives.base import Batch, Example, Objective, ObjectiveOutput, accuracy
from ptm_core.tokenization import VocabInfo


def encode_segment_pair(a: Sequence[int], b: Sequence[int], vocab: VocabInfo) -> Example:
    """``[CLS] A [SEP] B [SEP]`` with segment ids and the special-token mask."""
    ids = [vocab.cls_id, *a, vocab.sep_id, *b, vocab.sep_id]
    types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    special = [0] * len(ids)
    special[0] = special[len(a) + 1] = special[-1] = 1
    return {"input_ids": ids, "token_type_ids": types, "special_tokens_mask": special}


def split_segment_pair(example: Example) -> tuple[list[int], list[int]]:
    """Inverse of :func:`encode_segment_pair`: the word pieces of A and of B."""
    ids, types = example["input_ids"], example["token_type_ids"]
    a_end = types.index(1) - 1  # position of the first [SEP]
    return list(ids[1:a_end]), list(ids[a_end + 1 : -1])


def build_sentence_order_examples(
    documents: Sequence[TokenizedDocument],
    vocab: VocabInfo,
    max_length: int,
    rng: random.Random,
    *,
    swap_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> list[Example]:
    """Segment pairs for SOP (Lan et al., 2020).

    Every pair is two *consecutive* segments of one document, cut as BERT cuts NSP pairs
    (:func:`build_segment_pair_examples` with no random B). With probability
    ``swap_prob`` the two are swapped: ``[CLS] B [SEP] A [SEP]``, label 1; otherwise they
    stay in order, label 0. Topic cues cannot tell the classes apart, only coherence.

    Returns:
        Examples with ``input_ids``, ``token_type_ids``, ``special_tokens_mask``,
        ``sentence_order_label`` (1 = swapped).
    """
    store = InMemoryTokenStore(documents)
    plan = plan_sentence_order(store, max_length, rng, swap_prob, short_seq_prob)
    return list(sentence_order_rows(store, plan, vocab))


def plan_sentence_order(
    store: TokenStore,
    max_length: int,
    rng: random.Random,
    swap_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> np.ndarray:
    """Consecutive pairs (no random B), then one swap draw per pair, in plan order."""
    return concat_plan(
        iter_sentence_order(store, max_length, rng, swap_prob, short_seq_prob), PAIR_COLUMNS
    )


def iter_sentence_order(
    store: TokenStore,
    max_length: int,
    rng: random.Random,
    swap_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> Iterator[np.ndarray]:
    """:func:`plan_sentence_order` in chunks.

    The swaps are drawn after every pair, from the same source, so the pair chunks are
    kept (compactly, 56 bytes a pair) until the last one is planned.
    """
    if not 0.0 <= swap_prob <= 1.0:
        raise ValueError(f"swap_prob must be in [0, 1], got {swap_prob}")
    chunks = list(
        iter_segment_pairs(
            store, max_length, rng, random_next_prob=0.0, short_seq_prob=short_seq_prob
        )
    )
    for chunk in chunks:
        yield draw_swaps(chunk, rng, swap_prob)


def sentence_order_rows(store: TokenStore, plan: np.ndarray, vocab: VocabInfo) -> SegmentPairRows:
    """``[CLS] B [SEP] A [SEP]`` where the plan says swapped, with ``sentence_order_label``."""
    return SegmentPairRows(
        store,
        plan,
        vocab,
        label_key="sentence_order_label",
        swap_on_label=True,
        with_documents=False,
    )


class SentenceOrderObjective(Objective):
    """Sentence-order prediction (Lan et al., 2020, ALBERT).

    Data side (:meth:`build_examples`): positive = two consecutive segments of a document
    in their order, negative = the same two segments swapped (``swap_prob``, 50%). Loss
    side: pooled ``[CLS]`` -> :class:`SentencePairHead` -> cross-entropy. Unlike NSP, the
    negative comes from the same document, so the task is coherence, not topic.

    Args:
        hidden_size: width of the states the head reads.
        vocab: the tokenizer's special ids.
        swap_prob: probability that a pair is swapped (label 1).
        short_seq_prob: probability of a shorter target length (as BERT).

    Batch keys: ``sentence_order_label`` ``(B,)`` (0 = in order, 1 = swapped).
    """

    name = "sop"
    batch_keys = ("sentence_order_label",)
    needs_segments = True

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        swap_prob: float = 0.5,
        short_seq_prob: float = 0.1,
    ) -> None:
        super().__init__()
        if not 0.0 <= swap_prob <= 1.0:
            raise ValueError(f"swap_prob must be in [0, 1], got {swap_prob}")
        self.vocab = vocab
        self.swap_prob = swap_prob
        self.short_seq_prob = short_seq_prob
        self.head = SentencePairHead(hidden_size, num_labels=2)

    def rows(self, store: TokenStore, max_length: int, seed: int) -> SegmentPairRows:
        """Ordered/swapped pairs, planned once and built per index."""
        settings = {
            "max_length": max_length,
            "seed": seed,
            "swap_prob": self.swap_prob,
            "short_seq_prob": self.short_seq_prob,
        }
        plan = cached_plan(
            store,
            "sop",
            settings,
            lambda: iter_sentence_order(
                store, max_length, random.Random(seed), self.swap_prob, self.short_seq_prob
            ),
        )
        return sentence_order_rows(store, plan, self.vocab)

    def build_examples(
        self, documents: Sequence[TokenizedDocument], max_length: int, rng: random.Random
    ) -> list[Example]:
        """Ordered/swapped pairs; see :func:`build_sentence_order_examples`."""
        return build_sentence_order_examples(
            documents,
            self.vocab,
            max_length,
            rng,
            swap_prob=self.swap_prob,
            short_seq_prob=self.short_seq_prob,
        )

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        logits = self.head(encoder_output.last_hidden_state)  # (B, 2)
        labels = batch["sentence_order_label"]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )
