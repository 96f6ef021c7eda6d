"""ELMo scalar mix over a frozen encoder's hidden states, feeding a downstream model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ptm_core import bert_encoder
from ptm_core.features import FrozenEncoderFeatures
from ptm_core.modules import ScalarMix


def test_scalar_mix_is_gamma_times_softmax_weighted_sum() -> None:
    mix = ScalarMix(3, initial_scalars=[0.5, -1.0, 2.0])
    with torch.no_grad():
        mix.gamma.fill_(1.7)
    layers = [torch.randn(2, 4, 8) for _ in range(3)]
    w = torch.softmax(torch.tensor([0.5, -1.0, 2.0]), dim=0)
    expected = 1.7 * (w[0] * layers[0] + w[1] * layers[1] + w[2] * layers[2])
    torch.testing.assert_close(mix(layers), expected)
    # The default start is the plain average.
    torch.testing.assert_close(ScalarMix(3)(layers), sum(layers) / 3)
    with pytest.raises(ValueError, match="3 layers"):
        mix(layers[:2])
    with pytest.raises(ValueError, match="initial_scalars"):
        ScalarMix(2, initial_scalars=[1.0])


def test_frozen_encoder_features_train_only_the_mix_and_the_downstream_model() -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=30, hidden_size=16, num_layers=2, num_heads=2)
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    features = FrozenEncoderFeatures(encoder)
    assert features.mix.num_layers == 3  # embeddings + 2 layers
    tagger = nn.Linear(features.hidden_size, 2)
    model = nn.ModuleDict({"features": features, "tagger": tagger}).train()
    assert not encoder.training  # frozen encoder stays in eval mode (no dropout)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {id(p) for p in trainable} == {
        id(features.mix.scalars),
        id(features.mix.gamma),
        *(id(p) for p in tagger.parameters()),
    }
    ids = torch.randint(5, 30, (8, 6))
    labels = (ids % 2 == 0).long()
    optimiser = torch.optim.Adam(trainable, lr=0.05)
    losses = []
    for _ in range(40):
        logits = tagger(features(ids, torch.ones_like(ids)))
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert not torch.allclose(features.mix.weights(), torch.full((3,), 1 / 3))
    for key, value in encoder.state_dict().items():
        assert torch.equal(value, before[key]), key
    with pytest.raises(ValueError, match="hidden states"):
        FrozenEncoderFeatures(encoder, layers=[5])
