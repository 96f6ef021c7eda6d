"""The XLM text-stack builder builds the weights it built before the core builders.

Fingerprint (tensor count, hash of names and shapes, position-weighted sum of the values)
taken before the refactor, seed 0; see tests/core/test_encoder_builders.py.
"""

from __future__ import annotations

import hashlib

import pytest
import torch

from ptm_multilingual.model import xlm_text_encoder


def test_xlm_text_encoder_builds_the_former_weights() -> None:
    torch.manual_seed(0)
    encoder = xlm_text_encoder(vocab_size=100, hidden_size=32, num_layers=2, num_heads=2)
    state = encoder.state_dict()
    shapes = ";".join(f"{k}:{tuple(v.shape)}" for k, v in state.items())
    total = 0.0
    for index, tensor in enumerate(state.values()):
        flat = tensor.double().flatten()
        weights = torch.linspace(1.0, 2.0, flat.numel(), dtype=torch.float64)
        total += (index + 1) * float((flat * weights).sum())
    assert (len(state), hashlib.sha256(shapes.encode()).hexdigest()[:16]) == (
        28,
        "dd219fb2950f33ae",
    )
    assert total == pytest.approx(3546.568947917963, rel=1e-12)
    assert encoder.config.type_vocab_size == 0 and encoder.config.pad_token_id == 2
