"""VisualBERT and ViLBERT builders build the weights they built before the core builders.

Fingerprints (tensor count, hash of names and shapes, position-weighted sum of the values)
were taken before the refactor, seed 0; see tests/core/test_encoder_builders.py.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import pytest
import torch
from torch import Tensor

from ptm_multimodal.vilbert import vilbert
from ptm_multimodal.visualbert import visualbert


def fingerprint(state: Mapping[str, Tensor]) -> tuple[int, str, float]:
    shapes = ";".join(f"{k}:{tuple(v.shape)}" for k, v in state.items())
    total = 0.0
    for index, tensor in enumerate(state.values()):
        if tensor.is_floating_point():
            flat = tensor.detach().double().flatten()
            weights = torch.linspace(1.0, 2.0, flat.numel(), dtype=torch.float64)
            total += (index + 1) * float((flat * weights).sum())
    return len(state), hashlib.sha256(shapes.encode()).hexdigest()[:16], total


def test_visualbert_builds_the_former_weights() -> None:
    torch.manual_seed(0)
    model = visualbert(
        vocab_size=100, visual_embedding_dim=8, hidden_size=32, num_layers=2, num_heads=2
    )
    count, shapes, total = fingerprint(model.state_dict())
    assert (count, shapes) == (33, "b48a83ef577bb7d2")
    assert total == pytest.approx(3790.5153043351006, rel=1e-12)
    assert model.encoder.config.max_positions == 513
    assert model.encoder.config.type_vocab_size == 4


def test_vilbert_builds_the_former_weights() -> None:
    torch.manual_seed(0)
    model = vilbert(
        vocab_size=100,
        visual_embedding_dim=8,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        image_hidden_size=16,
        image_num_layers=2,
        image_num_heads=2,
        co_hidden_size=16,
        co_num_heads=2,
        co_attention_after=((1, 0), (2, 1)),
    )
    count, shapes, total = fingerprint(model.state_dict())
    assert (count, shapes) == (115, "621f94356ccf22b4")
    assert total == pytest.approx(36130.248183532545, rel=1e-12)
