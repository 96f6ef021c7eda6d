"""Sentence-order prediction: consecutive segments, 50% +/- 3% swapped, swapped = same two."""

from __future__ import annotations

import random

import pytest
import torch
from cases import ObjectiveTestCase, token_batch

from ptm_core import bert_encoder
from ptm_core.encoders import EncoderOutput
from ptm_core.objectives import SentenceOrderObjective, build_sentence_order_examples
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.sop import split_segment_pair
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=100_000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _documents(count: int, rng: random.Random) -> list[list[list[int]]]:
    """Documents whose word pieces count up, so order and adjacency can be read off ids."""
    docs, next_id = [], 10
    for _ in range(count):
        doc = []
        for _ in range(rng.randint(2, 8)):
            length = rng.randint(1, 6)
            doc.append(list(range(next_id, next_id + length)))
            next_id += length
        docs.append(doc)
    return docs


def test_swap_rate_is_half_and_negatives_are_the_same_segments_swapped() -> None:
    rng = random.Random(0)
    examples = build_sentence_order_examples(
        _documents(3500, rng), VOCAB, max_length=256, rng=rng, short_seq_prob=0.0
    )
    assert len(examples) >= 3000
    labels = [e["sentence_order_label"] for e in examples]
    assert abs(sum(labels) / len(labels) - 0.5) <= 0.03
    for example in examples:
        first, second = split_segment_pair(example)
        assert first and second
        assert example["input_ids"][0] == VOCAB.cls_id and example["input_ids"][-1] == VOCAB.sep_id
        assert example["token_type_ids"].count(0) == len(first) + 2
        if example["sentence_order_label"]:
            # Swapped: the second shown segment is A, which ends right before B starts.
            assert second[-1] + 1 == first[0]
        else:
            assert first[-1] + 1 == second[0]
        # Each segment is a contiguous run of one document.
        for segment in (first, second):
            assert segment == list(range(segment[0], segment[0] + len(segment)))


def test_swap_prob_is_configurable_and_checked() -> None:
    rng = random.Random(1)
    examples = build_sentence_order_examples(
        _documents(300, rng), VOCAB, max_length=256, rng=rng, swap_prob=0.0
    )
    assert not any(e["sentence_order_label"] for e in examples)
    with pytest.raises(ValueError, match="swap_prob"):
        build_sentence_order_examples([], VOCAB, 64, rng, swap_prob=1.5)


def test_objective_loss_and_accuracy() -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2)
    objective = build_objective(SentenceOrderObjective, encoder, VocabInfo(50, 0, 1, 2, 3, 4))
    hidden = torch.randn(4, 6, 16)
    out = objective(EncoderOutput(hidden), {"sentence_order_label": torch.tensor([0, 1, 1, 0])})
    assert out.loss.ndim == 0 and out.loss.item() > 0
    assert 0.0 <= out.metrics["accuracy"].item() <= 1.0


class TestSentenceOrderContract(ObjectiveTestCase):
    objective_cls = SentenceOrderObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        return {**token_batch(), "sentence_order_label": torch.tensor([0, 1, 1, 0])}
