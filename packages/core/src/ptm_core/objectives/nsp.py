"""Next-sentence prediction (BERT)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch.nn.functional as F

from ptm_core.data.layouts import (
    SegmentPairRows,
    cached_plan,
    iter_segment_pairs,
)
from ptm_core.data.segments import TokenizedDocument, build_segment_pair_examples
from ptm_core.data.token_store import TokenStore
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.sentence_pair import SentencePairHead
from ptm_core.objectives.base import Batch, Example, Objective, ObjectiveOutput, accuracy
from ptm_core.tokenization import VocabInfo


class NextSentenceObjective(Objective):
    """Next-sentence prediction (Devlin et al., 2019).

    Data side (:meth:`build_examples`): documents are cut into segment pairs
    ``[CLS] A [SEP] B [SEP]``; with probability ``random_next_prob`` B is a random span
    from another document (label 1, "not next"), otherwise the true continuation (label
    0, "is next"), following Google's ``create_pretraining_data.py``. Loss side: pooled
    ``[CLS]`` -> :class:`SentencePairHead` -> cross-entropy.

    Args:
        hidden_size: width of the states the head reads.
        vocab: the tokenizer's special ids.
        random_next_prob: probability that segment B comes from another document.
        short_seq_prob: probability of a shorter target length (pre-training/fine-tuning
            length mismatch, as BERT).

    Batch keys: ``next_sentence_label`` ``(B,)`` (0 = B follows A, 1 = random).
    """

    name = "nsp"
    batch_keys = ("next_sentence_label",)
    needs_segments = True

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        random_next_prob: float = 0.5,
        short_seq_prob: float = 0.1,
    ) -> None:
        super().__init__()
        if not 0.0 <= random_next_prob <= 1.0:
            raise ValueError(f"random_next_prob must be in [0, 1], got {random_next_prob}")
        self.vocab = vocab
        self.random_next_prob = random_next_prob
        self.short_seq_prob = short_seq_prob
        self.head = SentencePairHead(hidden_size, num_labels=2)

    def rows(self, store: TokenStore, max_length: int, seed: int) -> SegmentPairRows:
        """Segment pairs with ``next_sentence_label``, planned once and built per index."""
        settings = {
            "max_length": max_length,
            "seed": seed,
            "random_next_prob": self.random_next_prob,
            "short_seq_prob": self.short_seq_prob,
        }
        plan = cached_plan(
            store,
            "nsp",
            settings,
            lambda: iter_segment_pairs(
                store,
                max_length,
                random.Random(seed),
                random_next_prob=self.random_next_prob,
                short_seq_prob=self.short_seq_prob,
            ),
        )
        return SegmentPairRows(store, plan, self.vocab, label_key="next_sentence_label")

    def build_examples(
        self,
        documents: Sequence[TokenizedDocument],
        max_length: int,
        rng: random.Random,
    ) -> list[Example]:
        """Segment pairs with ``next_sentence_label``; see :func:`build_segment_pair_examples`."""
        return build_segment_pair_examples(
            documents,
            self.vocab,
            max_length,
            rng,
            random_next_prob=self.random_next_prob,
            short_seq_prob=self.short_seq_prob,
        )

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        logits = self.head(encoder_output.last_hidden_state)  # (B, 2)
        labels = batch["next_sentence_label"]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )
