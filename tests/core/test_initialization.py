"""init_bert_weights re-initialises parameters as BERT does and leaves buffers alone."""

from __future__ import annotations

import torch
from torch import nn

from ptm_core import bert_encoder
from ptm_core.modules import init_bert_weights


def test_bert_init_statistics_and_buffers() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(5000, 64, padding_idx=0), nn.Linear(64, 64), nn.LayerNorm(64)
    )
    model.register_buffer("table", torch.full((3, 3), 7.0))
    with torch.no_grad():
        model[2].weight.fill_(3.0)
    init_bert_weights(model, std=0.02)
    embedding = model[0].weight
    assert abs(embedding[1:].std().item() - 0.02) < 0.001
    assert torch.equal(embedding[0], torch.zeros(64))
    assert torch.equal(model[1].bias, torch.zeros(64))
    assert torch.equal(model[2].weight, torch.ones(64))
    assert torch.equal(model.table, torch.full((3, 3), 7.0))


def test_matches_the_encoders_own_initialisation_scale() -> None:
    torch.manual_seed(1)
    encoder = bert_encoder(vocab_size=3000, hidden_size=64, num_layers=1, num_heads=2)
    built = encoder.word_embeddings.weight.std().item()
    init_bert_weights(encoder)
    assert abs(encoder.word_embeddings.weight.std().item() - built) < 0.002
