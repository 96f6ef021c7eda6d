"""Sentence-pair objectives on one-sentence documents: the shortcut warning (#31 item 18)."""

from __future__ import annotations

import logging
import random

import pytest

from ptm_core import bert_encoder
from ptm_core.data.document_shape import sentence_shape
from ptm_core.data.token_store import InMemoryTokenStore
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, SentenceOrderObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.pretraining import build_examples
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=500, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _documents(count: int, one_sentence_share: float, seed: int) -> list[list[list[int]]]:
    """Documents of one sentence (a paragraph per line, say) or of 2-9 sentences."""
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        sentences = 1 if rng.random() < one_sentence_share else rng.randint(2, 9)
        docs.append([[rng.randrange(10, 500) for _ in range(rng.randint(3, 40))]] * sentences)
    return docs


def _mix(pair: type) -> ObjectiveMix:
    encoder = bert_encoder(vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=1, num_heads=2)
    return ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, VOCAB),
            pair.name: build_objective(pair, encoder, VOCAB),
        }
    )


@pytest.mark.parametrize("pair", [NextSentenceObjective, SentenceOrderObjective])
def test_most_one_sentence_documents_warn_naming_the_objective(pair, caplog) -> None:
    docs = _documents(300, one_sentence_share=0.8, seed=4)
    with caplog.at_level(logging.WARNING, logger="ptm_core.data.document_shape"):
        build_examples(_mix(pair), docs, VOCAB, 64, seed=0)
    warned = [r.getMessage() for r in caplog.records if "one sentence" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    assert pair.name.upper() in warned[0]
    single = sum(len(d) == 1 for d in docs)
    assert f"{round(100 * single / 300)}% of 300 documents" in warned[0]


def test_documents_of_several_sentences_do_not_warn(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ptm_core.data.document_shape"):
        build_examples(_mix(NextSentenceObjective), _documents(300, 0.2, 5), VOCAB, 64, 0)
    assert "one sentence" not in caplog.text


def test_sentence_shape_samples_large_corpora_evenly() -> None:
    docs = _documents(2_000, one_sentence_share=0.6, seed=6)
    shape = sentence_shape(InMemoryTokenStore(docs), sample=500)
    assert shape.documents == 500 and shape.total_documents == 2_000
    assert abs(shape.share - sum(len(d) == 1 for d in docs) / 2_000) < 0.08
