"""K-BERT's visible matrix as an AttentionStructure: same matrix, same model outputs."""

from __future__ import annotations

import pytest
import torch
from knowledge_sample_paths import VOCAB

from ptm_core.encoders import bert_encoder
from ptm_core.finetune.model import build_task_model
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.kbert import (
    KBertFeaturizer,
    knowledge_from_graph,
    mask_transformer,
    segment_words,
)
from ptm_knowledge.kbert.tsv import LabeledSentence

SENTENCES = [
    "Marie Curie moved to Paris in 1891 .",
    "The Danube flows through Vienna and Budapest .",
    "Paris .",
]


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB)


def test_structured_featurizer_equals_the_visible_matrix(tokenizer, sample_kg) -> None:
    knowledge = knowledge_from_graph(sample_kg)
    rows = [LabeledSentence(segment_words(t), i % 2) for i, t in enumerate(SENTENCES)]
    dense = KBertFeaturizer(tokenizer, knowledge, max_length=64).featurize(rows)
    structured = KBertFeaturizer(
        tokenizer, knowledge, max_length=64, structured_mask=True
    ).featurize(rows)
    mask = structured["attention_mask"]
    assert isinstance(mask, AttentionStructure) and mask.kind == "kbert"
    assert bool(dense["is_knowledge"].any()), "the sample KG must inject branches"
    assert torch.equal(mask.dense(), dense["attention_mask"])
    assert set(structured) == set(dense)
    for key in dense:
        if key != "attention_mask":
            assert torch.equal(structured[key], dense[key]), key

    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    ).eval()
    model = build_task_model(encoder, "classification", 2).eval()
    with torch.no_grad():
        expected = model(dense)
        hidden = mask_transformer(encoder, {**dense, "visible_matrix": dense["attention_mask"]})
        for backend in ("sdpa", "flex", "dense"):
            apply_execution_settings(model, ExecutionSettings(attention_backend=backend))
            out = model(structured)
            torch.testing.assert_close(out.logits, expected.logits, atol=1e-5, rtol=0)
            assert out.loss is not None and expected.loss is not None
            torch.testing.assert_close(out.loss, expected.loss, atol=1e-5, rtol=0)
    collated = KBertFeaturizer(tokenizer, knowledge, max_length=64, structured_mask=True)
    batch = collated.collate([collated.encode(r.words) for r in rows])
    with torch.no_grad():
        torch.testing.assert_close(mask_transformer(encoder, batch), hidden, atol=1e-5, rtol=0)
