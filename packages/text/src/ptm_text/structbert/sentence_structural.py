"""StructBERT's sentence-structural objective: is S2 the next, the previous or a random segment?"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch.nn.functional as F

from ptm_core.data.layouts import (
    LABEL,
    PAIR_COLUMNS,
    SegmentPairRows,
    cached_plan,
    concat_plan,
    iter_segment_pairs,
)
from ptm_core.data.segments import TokenizedDocument
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.sentence_pair import SentencePairHead
from ptm_core.objectives.base import Batch, Example, Objective, ObjectiveOutput, accuracy
from ptm_core.objectives.sop import encode_segment_pair
from ptm_core.tokenization import VocabInfo

LABEL_KEY = "sentence_structure_label"
# The three classes of the [CLS] classifier.
NEXT, PREVIOUS, RANDOM = 0, 1, 2
CLASS_NAMES = ("next", "previous", "random")


def iter_structural_pairs(
    store: TokenStore,
    max_length: int,
    rng: random.Random,
    *,
    random_prob: float = 1 / 3,
    previous_prob: float = 1 / 3,
    short_seq_prob: float = 0.1,
) -> Iterator[np.ndarray]:
    """Segment-pair plan chunks labelled next / previous / random.

    The pairs are BERT's NSP pairs (:func:`~ptm_core.data.layouts.iter_segment_pairs`) with
    ``random_prob`` of random second segments; each in-document pair is then turned round
    (``[CLS] S2 [SEP] S1 [SEP]``: the second segment precedes the first) with probability
    ``previous_prob / (1 - random_prob)``, so the three classes have ``1 - random_prob -
    previous_prob``, ``previous_prob`` and ``random_prob`` of the pairs. The direction draws
    come from their own source (seeded from ``rng`` first), so the pairs themselves are
    NSP's for the same seed.

    Yields:
        ``int64 (k, 7)`` chunks of pair rows whose label column holds :data:`NEXT`,
        :data:`PREVIOUS` or :data:`RANDOM`.
    """
    if not 0.0 <= random_prob < 1.0 or previous_prob < 0.0 or random_prob + previous_prob > 1.0:
        raise ValueError(
            "sentence_structural needs 0 <= random_prob < 1, previous_prob >= 0 and "
            f"random_prob + previous_prob <= 1, got {random_prob} and {previous_prob}"
        )
    directions = random.Random(rng.getrandbits(64))
    turn = previous_prob / (1.0 - random_prob)
    for chunk in iter_segment_pairs(
        store, max_length, rng, random_next_prob=random_prob, short_seq_prob=short_seq_prob
    ):
        labelled = chunk.copy()
        for row in range(len(labelled)):
            if labelled[row, LABEL]:
                labelled[row, LABEL] = RANDOM
            else:
                labelled[row, LABEL] = PREVIOUS if directions.random() < turn else NEXT
        yield labelled


class StructuralPairRows(SegmentPairRows):
    """``[CLS] S1 [SEP] S2 [SEP]`` rows of a structural plan, turned round for PREVIOUS.

    Args:
        store: the tokenised corpus.
        plan: ``(N, 7)`` rows of :func:`iter_structural_pairs`.
        vocab: special ids.
    """

    def __init__(self, store: TokenStore, plan: np.ndarray, vocab: VocabInfo) -> None:
        super().__init__(store, plan, vocab, label_key=LABEL_KEY, with_documents=False)

    def _build(self, index: int) -> Example:
        a_start, a_len, b_start, b_len, label = (int(v) for v in self.plan[index][:5])
        first, second = self._tokens(a_start, a_len), self._tokens(b_start, b_len)
        if label == PREVIOUS:
            first, second = second, first
        return {**encode_segment_pair(first, second, self.vocab), LABEL_KEY: label}


class SentenceStructuralObjective(Objective):
    """StructBERT's sentence-structural objective (Wang et al., 2019, Sec. 2.3).

    Data side (:meth:`rows`, :meth:`build_examples`): segment pairs ``(S1, S2)`` where S2
    is the segment that follows S1, the one that precedes it, or a segment of another
    document, each with probability 1/3 (:func:`iter_structural_pairs`). Loss side: pooled
    ``[CLS]`` -> a 3-way :class:`SentencePairHead` -> cross-entropy. It replaces NSP/SOP (it
    decides the pairing; use one of them only).

    Args:
        vocab: the tokenizer's special ids.
        hidden_size: width of the states the head reads.
        random_prob: probability that S2 comes from another document.
        previous_prob: probability that S2 is the segment before S1.
        short_seq_prob: probability of a shorter target length (as BERT).

    Batch keys: ``sentence_structure_label`` ``(B,)`` (0 = next, 1 = previous, 2 = random).
    """

    name = "sentence_structural"
    batch_keys = (LABEL_KEY,)
    needs_segments = True  # S2 is token type 1: core refuses a one-type encoder

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        random_prob: float = 1 / 3,
        previous_prob: float = 1 / 3,
        short_seq_prob: float = 0.1,
    ) -> None:
        super().__init__()
        if not 0.0 <= random_prob < 1.0 or previous_prob < 0.0 or random_prob + previous_prob > 1:
            raise ValueError(
                "sentence_structural needs 0 <= random_prob < 1, previous_prob >= 0 and "
                f"random_prob + previous_prob <= 1, got {random_prob} and {previous_prob}"
            )
        self.vocab = vocab
        self.random_prob = random_prob
        self.previous_prob = previous_prob
        self.short_seq_prob = short_seq_prob
        self.head = SentencePairHead(hidden_size, num_labels=len(CLASS_NAMES))

    def _plan(self, store: TokenStore, max_length: int, rng: random.Random) -> Iterator[np.ndarray]:
        return iter_structural_pairs(
            store,
            max_length,
            rng,
            random_prob=self.random_prob,
            previous_prob=self.previous_prob,
            short_seq_prob=self.short_seq_prob,
        )

    def rows(self, store: TokenStore, max_length: int, seed: int) -> StructuralPairRows:
        """Next / previous / random pairs, planned once and built per index."""
        settings = {
            "max_length": max_length,
            "seed": seed,
            "random_prob": self.random_prob,
            "previous_prob": self.previous_prob,
            "short_seq_prob": self.short_seq_prob,
        }
        plan = cached_plan(
            store,
            "structbert-sentence",
            settings,
            lambda: self._plan(store, max_length, random.Random(seed)),
        )
        return StructuralPairRows(store, plan, self.vocab)

    def build_examples(
        self, documents: Sequence[TokenizedDocument], max_length: int, rng: random.Random
    ) -> list[Example]:
        """Every pair of in-memory documents, with the plan :meth:`rows` uses."""
        store = InMemoryTokenStore(documents)
        plan = concat_plan(self._plan(store, max_length, rng), PAIR_COLUMNS)
        return list(StructuralPairRows(store, plan, self.vocab))

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        logits = self.head(encoder_output.last_hidden_state)  # (B, 3)
        labels = batch[LABEL_KEY]
        return ObjectiveOutput(
            loss=F.cross_entropy(logits.float(), labels),
            metrics={"accuracy": accuracy(logits, labels)},
        )
