"""Quantisation: outputs stay close to fp32, the linears really are quantised, saves load."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from compress_fixtures import batch_of, tiny_classifier, tiny_encoder
from torch import nn

from ptm_core.checkpoints import CheckpointError
from ptm_core.compress import compress_final, load_compressed
from ptm_core.compress.quantize import (
    WeightOnlyLinear,
    dynamic_linear_type,
    quantize_dynamic_int8,
    quantize_weight_only,
)
from ptm_core.finetune.model import load_task_model


def _linear_count(model: nn.Module) -> int:
    return sum(isinstance(m, nn.Linear) for m in model.modules())


@torch.no_grad()
def test_int8_quantises_every_linear_and_stays_close() -> None:
    model = tiny_classifier()
    batch = batch_of()
    expected = model(batch).logits
    hidden = model.encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    count = _linear_count(model)
    quantised = quantize_dynamic_int8(model)
    assert _linear_count(quantised) == 0
    assert sum(isinstance(m, dynamic_linear_type()) for m in quantised.modules()) == count == 10
    assert _linear_count(model) == count  # the source is a copy, untouched
    got = quantised(batch).logits
    got_hidden = quantised.encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    # int8 weights (per channel) and activations (per batch): about 1% of the output's range.
    assert (got - expected).abs().max() <= 0.03 * expected.abs().max() + 1e-3
    assert (got_hidden - hidden).abs().max() <= 0.03 * hidden.abs().max()
    assert not torch.equal(got, expected)  # something was quantised


@torch.no_grad()
def test_weight_only_int8_and_int4() -> None:
    encoder = tiny_encoder()
    ids = batch_of()["input_ids"]
    expected = encoder(ids).last_hidden_state
    int8, names8, skipped8 = quantize_weight_only(encoder, bits=8)
    assert len(names8) == 8 and not skipped8
    assert all(isinstance(int8.get_submodule(n), WeightOnlyLinear) for n in names8)
    assert (int8(ids).last_hidden_state - expected).abs().max() <= 0.01 * expected.abs().max()
    int4, names4, _ = quantize_weight_only(encoder, bits=4, group_size=32)
    assert len(names4) == 8
    layer = int4.get_submodule(names4[0])
    original = encoder.get_submodule(names4[0]).weight
    step = layer.scales_and_zeros[..., 0].t().repeat_interleave(32, dim=1)  # (N, K)
    # Round to nearest: every weight within half a step of its group's grid.
    assert ((layer.dequantized_weight() - original).abs() <= step / 2 + 1e-6).all()
    assert (int4(ids).last_hidden_state - expected).abs().max() <= 0.2 * expected.abs().max()


def test_int4_keeps_float_where_the_kernel_refuses_and_checks_group_size() -> None:
    model = tiny_classifier()
    _, names, skipped = quantize_weight_only(model, bits=4)
    assert "head.classifier" not in names  # N = 2 labels: the kernel wants N % 16 == 0
    assert any(s.startswith("head.classifier") for s in skipped)
    with pytest.raises(ValueError, match="32, 64, 128, 256"):
        quantize_weight_only(model, bits=4, group_size=16)


@pytest.mark.parametrize("method", ["int8", "int4-weight"])
@torch.no_grad()
def test_quantised_final_saves_and_loads(task_final: Path, tmp_path: Path, method: str) -> None:
    out = tmp_path / method
    result = compress_final(task_final, out, method)
    assert result.bytes_after < result.bytes_before
    loaded = load_compressed(out).model
    model, _ = load_task_model(task_final)
    batch = batch_of(vocab_size=model.encoder.config.vocab_size)
    if method == "int8":
        reference = quantize_dynamic_int8(model.eval())
    else:
        reference, _, _ = quantize_weight_only(model.eval(), bits=4)
    assert torch.equal(loaded(batch).logits, reference(batch).logits)
    assert (out / "vocab.txt").exists() and (out / "task.json").exists()
    with pytest.raises(CheckpointError, match="load_compressed"):
        load_task_model(out)
