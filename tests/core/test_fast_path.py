"""Fast paths give the same results as the plain ones: compiled inference, fused AdamW."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest
import torch
from torch import nn

from ptm_core.encoders.presets import bert_encoder
from ptm_core.fast import CompiledInference, compile_for_inference
from ptm_core.training import build_optimizer
from ptm_core.training.config import TrainerConfig
from ptm_core.training.optim import fused_adamw_supported


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def inductor_available() -> None:
    """Skip when Inductor cannot build a kernel here (e.g. no C++ compiler)."""
    try:
        torch.compile(lambda x: x * 2 + 1)(torch.ones(3))
    except Exception as error:  # any backend failure means "not available here"
        pytest.skip(f"torch.compile (Inductor) is unavailable: {error}")


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
        max_positions=16,
    )  # fmt: skip
    # Non-trivial LayerNorm parameters, so a wrongly folded constant would show.
    with torch.no_grad():
        for module in encoder.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.5, 0.5)
    return encoder


@pytest.mark.parametrize("freezing", [True, False])
def test_compiled_inference_equals_eager(inductor_available: None, freezing: bool) -> None:
    encoder = _encoder()
    eager = copy.deepcopy(encoder).eval()
    fast = compile_for_inference(encoder, freezing=freezing)
    ids = torch.randint(5, 100, (3, 12), generator=torch.Generator().manual_seed(1))
    padding = torch.ones(3, 12, dtype=torch.long)
    padding[1, 9:] = 0
    padding[2, 5:] = 0
    out = fast(ids, attention_mask=padding).last_hidden_state
    with torch.no_grad():
        expected = eager(ids, attention_mask=padding).last_hidden_state
    assert not out.requires_grad
    # Real positions only: eager unpads (zeros at padding), the compiled graph does not.
    real = padding.bool()
    torch.testing.assert_close(out[real], expected[real], rtol=0, atol=1e-5)
    # A [B, L, L] visibility matrix goes through the same compiled module.
    visibility = torch.rand(3, 12, 12, generator=torch.Generator().manual_seed(2)) > 0.3
    out = fast(ids, attention_mask=visibility).last_hidden_state
    with torch.no_grad():
        expected = eager(ids, attention_mask=visibility).last_hidden_state
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


def test_freezing_folds_the_weights_in(inductor_available: None) -> None:
    # Proves the freezing option reaches Inductor: frozen weights are constants, so a
    # weight changed after the first call is not seen (the documented contract); without
    # freezing the compiled graph reads the live weight.
    ids = torch.tensor([[5, 6, 7, 8]])
    outputs = {}
    for freezing in (True, False):
        encoder = _encoder()
        fast = compile_for_inference(encoder, freezing=freezing)
        before = fast(ids).last_hidden_state
        w_out = cast(nn.Linear, encoder.get_submodule("layers.0.feed_forward.w_out"))
        with torch.no_grad():
            w_out.weight.mul_(3.0)
        outputs[freezing] = torch.equal(fast(ids).last_hidden_state, before)
    assert outputs == {True: True, False: False}


def test_compiled_inference_refuses_training_mode() -> None:
    encoder = _encoder()
    fast = compile_for_inference(encoder)  # compiles lazily: nothing is built yet
    assert isinstance(fast, CompiledInference) and not encoder.training
    encoder.train()
    with pytest.raises(RuntimeError, match=r"\.eval\(\)"):
        fast(torch.tensor([[5, 6, 7]]))


def _config(tmp_path: Path, fused: bool | None) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(tmp_path), learning_rate=1e-2, weight_decay=0.01, fused_optimizer=fused
    )


def test_build_optimizer_fuses_on_cpu_by_default(tmp_path: Path) -> None:
    model = nn.Linear(4, 3)
    assert fused_adamw_supported(model)
    assert build_optimizer(model, _config(tmp_path, None)).defaults["fused"]
    assert not build_optimizer(model, _config(tmp_path, False)).defaults["fused"]


def test_fused_adamw_matches_foreach(tmp_path: Path) -> None:
    encoder = _encoder().train()
    twin = copy.deepcopy(encoder)
    fused = build_optimizer(encoder, _config(tmp_path, None))
    foreach = build_optimizer(twin, _config(tmp_path, False))
    assert fused.defaults["fused"] and not foreach.defaults["fused"]
    ids = torch.randint(5, 100, (2, 10), generator=torch.Generator().manual_seed(3))
    for step in range(3):
        for model, optimizer in ((encoder, fused), (twin, foreach)):
            torch.manual_seed(step)  # same dropout masks on both sides
            model(ids).last_hidden_state.square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    for (name, a), b in zip(encoder.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=name)
    moved = next(iter(encoder.parameters()))
    assert not torch.equal(moved, next(iter(_encoder().parameters())))  # training moved it


def test_bf16_linear_weights_are_bit_identical_under_autocast() -> None:
    from ptm_core.fast import bf16_linear_weights
    from ptm_core.heads.mlm import MaskedLMHead

    torch.manual_seed(0)
    encoder = _encoder().eval()
    head = MaskedLMHead(32, 100, tie_to=encoder.embeddings.word)
    model = nn.ModuleDict({"encoder": encoder, "head": head})
    cast = copy.deepcopy(model)
    count = bf16_linear_weights(cast)
    ids = torch.randint(5, 100, (3, 11))

    def run(m: nn.Module) -> torch.Tensor:
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            return m["head"](m["encoder"](ids).last_hidden_state)

    assert count > 0
    # The tied decoder shares the embedding table: it stays fp32, and so does the table.
    assert cast["head"].decoder.weight.dtype == torch.float32
    assert cast["encoder"].embeddings.word.weight.dtype == torch.float32
    assert torch.equal(run(model), run(cast))
