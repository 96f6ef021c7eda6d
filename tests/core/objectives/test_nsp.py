"""Next-sentence prediction: 50% random B from another document, exact pairing layout."""

from __future__ import annotations

import random

import pytest
import torch
from cases import ObjectiveTestCase, token_batch

from ptm_core import bert_encoder
from ptm_core.objectives import NextSentenceObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=10_000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
SENTENCES_PER_DOC = 12


def _documents(count: int, seed: int = 0) -> list[list[list[int]]]:
    """Documents whose token ids encode (document, sentence), so provenance is checkable."""
    rng = random.Random(seed)
    docs = []
    for d in range(count):
        doc = []
        for s in range(rng.randint(3, SENTENCES_PER_DOC)):
            token = 100 + d * SENTENCES_PER_DOC + s
            doc.append([token] * rng.randint(2, 25))
        docs.append(doc)
    return docs


def _doc_of(token: int) -> int:
    return (token - 100) // SENTENCES_PER_DOC


def _objective() -> NextSentenceObjective:
    encoder = bert_encoder(vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=1, num_heads=2)
    return build_objective(NextSentenceObjective, encoder, VOCAB)


def _segments(example: dict) -> tuple[list[int], list[int]]:
    ids, types = example["input_ids"], example["token_type_ids"]
    a = [t for t, ty in zip(ids, types, strict=True) if ty == 0 and t >= 100]
    b = [t for t, ty in zip(ids, types, strict=True) if ty == 1 and t >= 100]
    return a, b


def test_half_of_pairs_are_random_and_come_from_another_document() -> None:
    examples = _objective().build_examples(_documents(800), 64, random.Random(0))
    assert len(examples) >= 2000
    positives = sum(e["next_sentence_label"] == 0 for e in examples)
    assert abs(positives / len(examples) - 0.5) <= 0.03
    for example in examples:
        a, b = _segments(example)
        a_docs, b_docs = {_doc_of(t) for t in a}, {_doc_of(t) for t in b}
        assert len(a_docs) == 1 and len(b_docs) == 1
        if example["next_sentence_label"] == 1:
            assert a_docs != b_docs  # negatives from another document
        else:
            assert a_docs == b_docs
            # a true continuation: B follows A in the document (truncation may trim the
            # sentences at the boundary, as in Google's reference, but never reorders)
            assert b[0] >= a[-1]


def test_layout_of_a_pair() -> None:
    for example in _objective().build_examples(_documents(20), 32, random.Random(1)):
        ids, types, special = (
            example["input_ids"],
            example["token_type_ids"],
            example["special_tokens_mask"],
        )
        assert len(ids) <= 32
        assert ids[0] == VOCAB.cls_id and ids[-1] == VOCAB.sep_id
        first_sep = ids.index(VOCAB.sep_id)
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        assert [i for i, s in enumerate(special) if s] == [0, first_sep, len(ids) - 1]
        assert first_sep > 1 and len(ids) - first_sep > 2  # both segments non-empty


def test_examples_are_deterministic_given_the_seed() -> None:
    objective = _objective()
    docs = _documents(30)
    a = objective.build_examples(docs, 48, random.Random(5))
    b = objective.build_examples(docs, 48, random.Random(5))
    c = objective.build_examples(docs, 48, random.Random(6))
    assert a == b
    assert a != c


def test_one_document_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="at least two non-empty documents"):
        _objective().build_examples(_documents(1), 64, random.Random(0))


def test_loss_and_accuracy() -> None:
    objective = _objective()
    from ptm_core.encoders import EncoderOutput

    hidden = torch.randn(4, 6, 16)
    out = objective(
        EncoderOutput(last_hidden_state=hidden), {"next_sentence_label": torch.tensor([0, 1, 0, 1])}
    )
    assert out.loss.ndim == 0 and out.loss.item() > 0
    assert 0.0 <= out.metrics["accuracy"].item() <= 1.0


class TestNextSentenceContract(ObjectiveTestCase):
    objective_cls = NextSentenceObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        return {**token_batch(), "next_sentence_label": torch.tensor([0, 1, 1, 0])}
