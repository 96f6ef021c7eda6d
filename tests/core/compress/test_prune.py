"""Head pruning (Michel et al., 2019) = masking, physically smaller; importance; layer dropping."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from compress_fixtures import batch_of, tiny_classifier, tiny_encoder

from ptm_core.compress import compress_final
from ptm_core.compress.prune import (
    drop_layers,
    head_importance,
    head_mask,
    layers_to_keep,
    parameter_count,
    prune_heads,
    replace_encoder,
    select_heads_to_prune,
)
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import load_task_model


@torch.no_grad()
def test_pruning_equals_masking_and_is_smaller(tmp_path: Path) -> None:
    encoder = tiny_encoder()
    batch = batch_of()
    remove = {0: [1, 3], 1: [0]}
    gates = [torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 1.0, 1.0])]
    with head_mask(encoder, gates):
        masked = encoder(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    pruned = prune_heads(encoder, remove)
    got = pruned(batch["input_ids"], batch["attention_mask"]).last_hidden_state
    assert (got - masked).abs().max() <= 1e-5
    assert pruned.config.heads_per_layer == [2, 3]
    # 3 heads x (Q, K, V rows and O columns) of width 8 over hidden 32, plus 3 x 3 x 8 biases.
    assert parameter_count(encoder) - parameter_count(pruned) == 3 * (4 * 8 * 32 + 3 * 8)
    pruned.save_pretrained(tmp_path / "p")
    again = TransformerEncoder.from_pretrained(tmp_path / "p").eval()
    assert torch.equal(again(batch["input_ids"], batch["attention_mask"]).last_hidden_state, got)
    with pytest.raises(ValueError, match="at least one"):
        prune_heads(encoder, {0: [0, 1, 2, 3]})


def test_head_importance_is_the_absolute_gate_gradient() -> None:
    model = tiny_classifier().double()
    batch = batch_of(batch=1, length=6)

    def loss_fn(module: torch.nn.Module, batch: dict) -> torch.Tensor:
        return F.cross_entropy(module(batch).logits, batch["labels"])  # float64 throughout

    scores = head_importance(model, [batch], loss_fn, normalize_layers=False)
    eps = 1e-5
    for layer, head in [(0, 0), (0, 3), (1, 2)]:
        losses = []
        for sign in (1, -1):
            gates = [torch.ones(4, dtype=torch.double) for _ in range(2)]
            gates[layer][head] += sign * eps
            with torch.no_grad(), head_mask(model.encoder, gates):
                losses.append(float(loss_fn(model, batch)))
        finite = abs(losses[0] - losses[1]) / (2 * eps)
        assert finite > 1e-6
        assert scores[layer][head].item() == pytest.approx(finite, rel=1e-4)


def test_a_head_with_zero_output_has_zero_importance_and_is_pruned_first() -> None:
    model = tiny_classifier()
    attention = model.encoder.layers[1].attention
    with torch.no_grad():
        attention.out_proj.weight[:, 2 * 8 : 3 * 8] = 0.0  # head 2's output is zeroed
    batches = [batch_of(seed=s) for s in range(2)]
    scores = head_importance(model, batches)
    assert scores[1][2].item() == 0.0
    assert all(s.min() >= 0 for s in scores) and scores[0].norm().item() == pytest.approx(1.0)
    assert select_heads_to_prune(scores, 1 / 8) == {1: [2]}


def test_select_heads_global_fraction_keeps_one_per_layer() -> None:
    scores = [torch.tensor([0.1, 0.2, 0.3, 0.4]), torch.tensor([0.9, 0.8, 0.7, 0.6])]
    assert select_heads_to_prune(scores, 0.5) == {0: [0, 1, 2], 1: [3]}
    assert select_heads_to_prune(scores, 0.0) == {}
    with pytest.raises(ValueError, match="fraction"):
        select_heads_to_prune(scores, 1.0)


def test_pruned_task_final_saves_and_loads(task_final: Path, tmp_path: Path) -> None:
    result = compress_final(task_final, tmp_path / "p", "prune-heads", fraction=0.5)
    assert result.params_after < result.params_before
    assert result.bytes_after < result.bytes_before
    model, config = load_task_model(tmp_path / "p")  # an ordinary final/
    assert sum(model.encoder.config.heads_per_layer) == 4
    assert config["task"]["name"] == "sentiment"


@torch.no_grad()
def test_drop_layers_keeps_the_chosen_layers_weights() -> None:
    encoder = tiny_encoder(num_layers=4)
    assert layers_to_keep("bottom:2", 4) == [0, 1]
    assert layers_to_keep("top:1", 4) == [3]
    assert layers_to_keep("every-other", 4) == [0, 2]
    assert layers_to_keep("3,1", 4) == [1, 3]
    with pytest.raises(ValueError, match=r"0\.\.3"):
        layers_to_keep("0,4", 4)
    dropped = drop_layers(encoder, [1, 3])
    assert dropped.config.num_layers == 2
    for new, old in ((0, 1), (1, 3)):
        for name, tensor in dropped.layers[new].state_dict().items():
            assert torch.equal(tensor, encoder.layers[old].state_dict()[name]), name
    assert torch.equal(dropped.embeddings.word.weight, encoder.embeddings.word.weight)
    # Running the kept layers by hand gives the dropped encoder's output.
    ids = batch_of()["input_ids"]
    hidden = encoder.embeddings(ids)
    for index in (1, 3):
        hidden = encoder.layers[index](hidden)
    assert torch.allclose(dropped(ids).last_hidden_state, hidden, atol=1e-6)
    model = replace_encoder(tiny_classifier(), dropped)
    assert model.encoder is dropped
