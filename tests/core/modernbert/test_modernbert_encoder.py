"""ModernBERT's encoder on ptm's stack: the unpadded path equals the padded one, the local
layers get a ``sliding`` structure (never a ``[B, L, L]`` mask), and flex runs it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import ptm_core.modules.attention as attention_module
from ptm_core.encoders.modernbert import ModernBertConfig, ModernBertEncoder
from ptm_core.modules.attention_masks import sliding_window_mask
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.modules.execution import ExecutionSettings

VOCAB = 61


def encoder(**settings: Any) -> ModernBertEncoder:
    torch.manual_seed(0)
    config = ModernBertConfig(
        vocab_size=VOCAB,
        hidden_size=48,
        num_heads=3,
        num_layers=3,
        intermediate_size=40,
        local_attention=8,
        global_attn_every_n_layers=2,
    )
    return ModernBertEncoder(config, settings=ExecutionSettings(**settings))


def padded_batch(left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, VOCAB, (3, 23), generator=g)
    mask = torch.ones_like(ids)
    for row, length in ((0, 17), (1, 6)):
        if left:
            mask[row, : 23 - length] = 0
        else:
            mask[row, length:] = 0
    return ids * mask, mask


@pytest.mark.parametrize("left", [False, True])
def test_unpadded_path_equals_padded_path_with_gradients(left: bool) -> None:
    ids, mask = padded_batch(left)
    real = mask.bool()
    outputs, grads = [], []
    for mode in ("off", "on"):
        model = encoder(unpadding=mode)
        hidden = model(ids, mask).last_hidden_state
        (hidden[real] ** 2).sum().backward()
        outputs.append(hidden[real].detach())
        grads.append(model.layers[1].attention.qkv_proj.weight.grad.clone())
    assert (outputs[0] - outputs[1]).abs().max().item() < 1e-5
    assert (grads[0] - grads[1]).abs().max().item() < 1e-4


def test_local_layers_hand_the_backend_a_sliding_structure(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[object] = []
    real_attend = attention_module.attend

    def spy(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: Any, *a: Any, **k: Any
    ) -> torch.Tensor:
        seen.append(mask)
        return real_attend(query, key, value, mask, *a, **k)

    monkeypatch.setattr(attention_module, "attend", spy)
    ids, mask = padded_batch()
    model = encoder(unpadding="off").eval()
    with torch.no_grad():
        model(ids, mask)
    # Layer 1 is the one local layer (global every 2nd: 0 and 2 are global).
    assert len(seen) == 1
    structure = seen[0]
    assert isinstance(structure, AttentionStructure)
    assert structure.kind == "sliding" and structure.window == 4
    assert tuple(structure.real.shape) == (3, 23)
    assert torch.equal(structure.dense(), sliding_window_mask(mask, 4))


def test_flex_builds_no_dense_mask_and_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    ids, mask = padded_batch()
    reference = encoder(unpadding="off").eval()
    with torch.no_grad():
        expected = reference(ids, mask).last_hidden_state

    def refuse(self: AttentionStructure, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a dense mask was built for a {self.kind} structure")

    for name in ("dense", "sdpa_mask", "reference_mask"):
        monkeypatch.setattr(AttentionStructure, name, refuse)
    flex = encoder(unpadding="off", attention_backend="flex").eval()
    with torch.no_grad():
        hidden = flex(ids, mask).last_hidden_state
    real = mask.bool()
    assert (hidden[real] - expected[real]).abs().max().item() < 1e-5


def test_windows_count_and_other_masks_are_refused() -> None:
    """A token beyond the window does not change a local layer's output; a [B, L, L]
    visibility mask or position_ids are refused with one line."""
    model = encoder(unpadding="off").eval()
    layer = model.layers[1].attention
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 20, 48, generator=g)
    y = x.clone()
    y[0, 15] += 1.0  # 15 - 10 = 5 > 4 positions away from token 10
    with torch.no_grad():
        a = layer(x, None)[0, 10]
        b = layer(y, None)[0, 10]
        c = layer(y, None)[0, 11]
    assert torch.allclose(a, b)
    assert not torch.allclose(c, layer(x, None)[0, 11])
    ids, mask = padded_batch()
    with pytest.raises(ValueError, match="takes a \\[B, L\\] padding mask"):
        model(ids, mask[:, None, :].expand(-1, 23, -1).bool())
    with pytest.raises(ValueError, match="no position_ids"):
        model(ids, mask, position_ids=torch.arange(23)[None])
