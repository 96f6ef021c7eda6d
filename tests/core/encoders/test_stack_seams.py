"""The encoder's seams: modules between layers, per-layer masks, and execution settings
given at construction (no global state)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_core.encoders.layers import TransformerLayer, build_layers
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import sliding_window_mask, to_sdpa_mask
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.dropout import Dropout
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings

CONFIG = EncoderConfig(
    vocab_size=60,
    hidden_size=32,
    num_layers=4,
    num_heads=4,
    intermediate_size=64,
    max_positions=32,
    dropout=0.0,
    attention_dropout=0.0,
)


def extra_layer(seed: int = 5) -> TransformerLayer:
    torch.manual_seed(seed)
    return build_layers(EncoderConfig(**{**CONFIG.to_dict(), "num_layers": 1}))[0]


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    ids = torch.randint(5, 60, (3, 12))
    mask = torch.ones(3, 12, dtype=torch.long)
    mask[1, 7:] = 0
    mask[2, 3:] = 0  # 36% padding: "auto" unpads
    return ids, mask


def encoder(settings: ExecutionSettings | None = None, **kwargs: object) -> TransformerEncoder:
    torch.manual_seed(0)
    return TransformerEncoder(CONFIG, settings=settings, **kwargs).eval()  # type: ignore[arg-type]


def by_hand(
    model: TransformerEncoder, ids: torch.Tensor, mask: torch.Tensor, at: int
) -> torch.Tensor:
    hidden = model.embed(ids)
    sdpa = to_sdpa_mask(mask, ids.shape[1])
    for index, layer in enumerate(model.layers):
        if index == at:
            hidden = model.inserted[str(at)](hidden, sdpa)
        hidden = layer(hidden, sdpa)
    if at == len(model.layers):
        hidden = model.inserted[str(at)](hidden, sdpa)
    return hidden


@pytest.mark.parametrize("at", [0, 2, 4])
def test_an_inserted_layer_equals_running_the_layers_by_hand(at: int) -> None:
    ids, mask = batch()
    model = encoder(ExecutionSettings(unpadding="off"), insert={at: extra_layer()})
    with torch.no_grad():
        out = model(ids, mask).last_hidden_state
        expected = by_hand(model, ids, mask, at)
    assert torch.equal(out, expected)
    plain = encoder(ExecutionSettings(unpadding="off"))
    with torch.no_grad():
        assert not torch.allclose(plain(ids, mask).last_hidden_state, out)
    assert any(name.startswith(f"inserted.{at}.") for name in model.state_dict())


def test_the_inserted_path_honours_unpadding() -> None:
    ids, mask = batch()
    real = mask.bool()
    padded = encoder(ExecutionSettings(unpadding="off"), insert={2: extra_layer()})
    unpadded = encoder(ExecutionSettings(unpadding="on"), insert={2: extra_layer()})
    with torch.no_grad():
        a = padded(ids, mask).last_hidden_state
        b = unpadded(ids, mask).last_hidden_state
    torch.testing.assert_close(b[real], a[real], atol=1e-5, rtol=0)
    assert bool((b[~real] == 0).all())  # the unpadded path really ran (zeros at padding)
    assert not bool((a[~real] == 0).all())


def test_the_inserted_path_honours_the_attention_backend() -> None:
    ids, mask = batch()
    structure = AttentionStructure.causal(mask.bool())
    outputs = {}
    for backend in ("flex", "sdpa", "dense"):
        model = encoder(ExecutionSettings(attention_backend=backend), insert={1: extra_layer()})
        inserted = model.inserted["1"]
        assert isinstance(inserted, TransformerLayer)
        attention = inserted.attention
        assert isinstance(attention, MultiHeadSelfAttention)
        assert attention.attention_backend == backend
        with torch.no_grad():
            outputs[backend] = model(ids, structure).last_hidden_state
    real = mask.bool()
    for backend in ("flex", "sdpa"):
        torch.testing.assert_close(
            outputs[backend][real], outputs["dense"][real], atol=1e-5, rtol=0
        )


def test_start_run_layers_finish_is_forward() -> None:
    ids, mask = batch()
    model = encoder()
    with torch.no_grad():
        expected = model(ids, mask, output_hidden_states=True)
        state = model.start(ids, mask, output_hidden_states=True)
        model.run_layers(state, 1)
        model.run_layers(state, 3)
        out = model.finish(state)
    assert torch.equal(out.last_hidden_state, expected.last_hidden_state)
    assert out.hidden_states is not None and expected.hidden_states is not None
    assert len(out.hidden_states) == CONFIG.num_layers + 1
    with pytest.raises(ValueError, match="between the layers done"):
        model.run_layers(state, 2)


def test_a_module_between_layers_through_the_state() -> None:
    ids, mask = batch()
    model = encoder(ExecutionSettings(unpadding="on"))
    with torch.no_grad():
        state = model.start(ids, mask)
        assert state.layout is not None  # unpadded: the module still sees (B, L, D)
        model.run_layers(state, 2)
        assert state.padded().shape == (3, 12, CONFIG.hidden_size)
        state.set_padded(state.padded() * 0.5)
        out = model.finish(state).last_hidden_state
        inserted = encoder(ExecutionSettings(unpadding="on"), insert={2: Halve()})
        expected = inserted(ids, mask).last_hidden_state
    assert torch.equal(out, expected)


class Halve(nn.Module):
    def forward(self, hidden: torch.Tensor, mask: object) -> torch.Tensor:
        return hidden * 0.5


def test_alternating_local_and_global_layers() -> None:
    ids, mask = batch()
    local = sliding_window_mask(mask, window=2)
    global_ = mask

    def per_layer(index: int) -> torch.Tensor:
        return local if index % 2 == 0 else global_

    model = encoder()
    with torch.no_grad():
        hidden = model.embed(ids)
        for index, layer in enumerate(model.layers):
            hidden = layer(hidden, to_sdpa_mask(per_layer(index), ids.shape[1]))
        from_function = model(ids, per_layer).last_hidden_state
        from_list = model(ids, [per_layer(i) for i in range(4)]).last_hidden_state
        everywhere_global = model(ids, mask).last_hidden_state
    real = mask.bool()
    assert torch.equal(from_function, hidden)
    assert torch.equal(from_list, hidden)
    assert not torch.allclose(from_function[real], everywhere_global[real])
    with pytest.raises(ValueError, match="one mask per layer: got 3 for 4 layers"):
        model(ids, [local, global_, local])


def test_sliding_window_mask() -> None:
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    window = sliding_window_mask(mask, 1)[0]
    assert window[0].tolist() == [True, True, False, False, False]
    assert window[3].tolist() == [False, False, True, True, False]
    assert not window[4].any()


def test_two_models_with_different_dropout_kernels_in_one_process() -> None:
    config = EncoderConfig(**{**CONFIG.to_dict(), "dropout": 0.1, "attention_dropout": 0.1})
    torch.manual_seed(0)
    by_torch = TransformerEncoder(config, settings=ExecutionSettings(dropout_kernel="torch"))
    by_ours = copy.deepcopy(by_torch)
    apply_execution_settings(by_ours, ExecutionSettings(dropout_kernel="auto"))
    kernels = {m.kernel for m in by_torch.modules() if isinstance(m, Dropout)}
    assert kernels == {"torch"}
    assert {m.kernel for m in by_ours.modules() if isinstance(m, Dropout)} == {"auto"}
    ids = torch.randint(5, 60, (8, 32))  # enough elements for the cheap mask
    by_torch.train()
    by_ours.train()
    torch.manual_seed(3)
    first = by_torch(ids).last_hidden_state
    torch.manual_seed(3)
    other = by_ours(ids).last_hidden_state
    torch.manual_seed(3)
    again = by_torch(ids).last_hidden_state
    assert torch.equal(first, again)  # the other model's kernel did not leak into this one
    assert not torch.allclose(first, other)


def test_a_run_keeps_the_kernel_a_model_was_built_with() -> None:
    model = encoder(ExecutionSettings(dropout_kernel="torch"))
    apply_execution_settings(model, ExecutionSettings(attention_backend="dense", unpadding="off"))
    assert model.settings == ExecutionSettings("dense", "off", "torch")
    assert {m.kernel for m in model.modules() if isinstance(m, Dropout)} == {"torch"}
    attention = model.layers[0].attention
    assert isinstance(attention, MultiHeadSelfAttention)
    assert (attention.attention_backend, attention.dropout_kernel) == ("dense", "torch")


def test_two_models_with_different_backends_in_one_process() -> None:
    dense, flex = encoder(ExecutionSettings("dense")), encoder(ExecutionSettings("flex"))
    backends = {
        name: {
            layer.attention.attention_backend
            for layer in model.layers
            if isinstance(layer.attention, MultiHeadSelfAttention)
        }
        for name, model in (("dense", dense), ("flex", flex))
    }
    assert backends == {"dense": {"dense"}, "flex": {"flex"}}


def test_a_container_hands_the_settings_to_its_stacks() -> None:
    holder = nn.ModuleDict({"a": encoder(), "b": nn.Sequential(encoder(), nn.Linear(2, 2))})
    apply_execution_settings(holder, ExecutionSettings(unpadding="on"))
    assert holder["a"].unpadding_mode == "on"
    assert holder["b"][0].unpadding_mode == "on"


def test_bad_settings_name_the_valid_values() -> None:
    with pytest.raises(ValueError, match="auto, on, off"):
        ExecutionSettings(unpadding="yes")
    with pytest.raises(ValueError, match="flex, sdpa, dense"):
        ExecutionSettings(attention_backend="flash")
    with pytest.raises(ValueError, match="auto, torch"):
        ExecutionSettings(dropout_kernel="philox")
    with pytest.raises(ValueError, match=r"outside 0\.\.num_layers=4"):
        TransformerEncoder(CONFIG, insert={5: Halve()})


def test_builders_take_the_settings() -> None:
    from ptm_core.encoders.builders import TransformerSize, albert, xlnet
    from ptm_core.modules.relative_attention import RelativeMultiHeadAttention

    size = TransformerSize(
        vocab_size=40, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32
    )
    settings = ExecutionSettings(attention_backend="dense", unpadding="off", dropout_kernel="torch")
    for model in (albert(size, settings=settings), xlnet(size, settings=settings)):
        assert model.settings == settings
        assert {m.kernel for m in model.modules() if isinstance(m, Dropout)} == {"torch"}
        kernels = {
            m.dropout_kernel
            for m in model.modules()
            if isinstance(m, MultiHeadSelfAttention | RelativeMultiHeadAttention)
        }
        assert kernels == {"torch"}
