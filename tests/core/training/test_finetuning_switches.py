"""ULMFiT / ELECTRA fine-tuning switches: depths, per-depth rates, STLR, gradual unfreezing."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.layers import standard_norm
from ptm_core.encoders.presets import albert_tiny, bert_encoder, bert_tiny, xlnet_tiny
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.training.finetuning import (
    LAYER_DECAY_PRESETS,
    GradualUnfreezing,
    discriminative_param_groups,
    layer_index,
    parameter_depths,
    slanted_triangular,
)


class TinyTaskModel(nn.Module):
    """Shaped like ``TaskModel``: ``.encoder`` + a head; loss on the first token."""

    def __init__(self, encoder: TransformerEncoder, num_labels: int = 3) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.hidden_size, num_labels)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids).last_hidden_state[:, 0]
        return nn.functional.cross_entropy(self.head(hidden), labels)


def small_encoder(num_layers: int = 3, **kwargs: object) -> TransformerEncoder:
    return bert_encoder(
        vocab_size=50,
        hidden_size=16,
        num_layers=num_layers,
        num_heads=2,
        intermediate_size=32,
        max_positions=16,
        **kwargs,  # type: ignore[arg-type]
    )


def test_layer_index_on_names() -> None:
    assert layer_index("encoder.embeddings.word.weight", 12) == 0
    assert layer_index("encoder.embedding_projection.weight", 12) == 0
    assert layer_index("encoder.query_embedding", 12) == 0
    assert layer_index("encoder.layers.0.attention.qkv_proj.weight", 12) == 1
    assert layer_index("encoder.layers.11.ffn_norm.bias", 12) == 12
    assert layer_index("encoder.relative_position_bias.table.weight", 12) == 12
    assert layer_index("encoder.final_norm.weight", 12) == 13
    assert layer_index("head.weight", 12) == 13
    assert layer_index("pooler.dense.weight", 12) == 13
    # A bare encoder: prefix "".
    assert layer_index("layers.1.ffn_norm.bias", 2, prefix="") == 2
    assert layer_index("embeddings.norm.weight", 2, prefix="") == 0
    with pytest.raises(ValueError, match="num_layers is 2"):
        layer_index("encoder.layers.2.ffn_norm.bias", 2)
    with pytest.raises(ValueError, match=r"encoder\.mystery"):
        layer_index("encoder.mystery.weight", 2)


def test_depths_of_bert_cover_every_parameter_once() -> None:
    encoder = bert_tiny()
    depths = {name: d for name, _, d in parameter_depths(encoder, prefix="")}
    assert set(depths) == {name for name, _ in encoder.named_parameters()}
    assert {d for n, d in depths.items() if n.startswith("embeddings.")} == {0}
    for i in range(2):
        assert {d for n, d in depths.items() if n.startswith(f"layers.{i}.")} == {i + 1}
    assert sorted(set(depths.values())) == [0, 1, 2]


def test_depths_of_task_model_put_the_head_on_top() -> None:
    model = TinyTaskModel(small_encoder(num_layers=3, norm_position="pre"))
    depths = {name: d for name, _, d in parameter_depths(model)}
    assert depths["head.weight"] == depths["head.bias"] == 4
    assert depths["encoder.final_norm.weight"] == 4
    assert depths["encoder.layers.2.ffn_norm.weight"] == 3
    assert depths["encoder.embeddings.word.weight"] == 0


def test_depths_of_albert_shared_layer_are_the_top_layer() -> None:
    model = TinyTaskModel(albert_tiny())  # 4 layers, share_layers="all"
    depths = {name: d for name, _, d in parameter_depths(model)}
    # named_parameters() lists the shared layer once, under layers.0; it serves layer 4 too.
    shared = [n for n in depths if n.startswith("encoder.layers.")]
    assert shared and all(n.startswith("encoder.layers.0.") for n in shared)
    assert {depths[n] for n in shared} == {4}
    assert depths["encoder.embedding_projection.weight"] == 0
    assert depths["head.weight"] == 5
    # Only the attention shared: it is at the top layer, each FFN at its own depth.
    partial = TinyTaskModel(small_encoder(num_layers=3, share_layers="attention"))
    partial_depths = {name: d for name, _, d in parameter_depths(partial)}
    assert partial_depths["encoder.layers.0.attention.qkv_proj.weight"] == 3
    assert partial_depths["encoder.layers.0.feed_forward.w_in.weight"] == 1
    assert partial_depths["encoder.layers.1.feed_forward.w_in.weight"] == 2


def test_depths_of_xlnet_and_t5_style_encoders() -> None:
    depths = {name: d for name, _, d in parameter_depths(xlnet_tiny(), prefix="")}
    assert depths["query_embedding"] == 0
    assert depths["layers.1.attention.content_bias"] == 2
    shape = EncoderConfig(
        vocab_size=50,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        position_encoding="bucketed",
        norm_position="pre",
    )
    t5_like = TransformerEncoder(shape, norm=lambda: standard_norm(shape, "rmsnorm"))
    t5_depths = {name: d for name, _, d in parameter_depths(t5_like, prefix="")}
    bias = [n for n in t5_depths if n.startswith("relative_position_bias.")]
    assert bias and {t5_depths[n] for n in bias} == {2}


@pytest.mark.parametrize(
    ("preset", "decay"), [("electra", 0.8), ("ulmfit", 1 / 2.6), (0.5, 0.5), (None, 1.0)]
)
def test_discriminative_rates_follow_the_formula(preset: float | str | None, decay: float) -> None:
    if isinstance(preset, str):
        assert LAYER_DECAY_PRESETS[preset] == pytest.approx(decay)
    model = TinyTaskModel(small_encoder(num_layers=3))
    lr, wd = 1e-3, 0.01
    groups = discriminative_param_groups(
        model, learning_rate=lr, weight_decay=wd, layer_decay=preset
    )
    depth_of = {id(p): d for _, p, d in parameter_depths(model)}
    seen: list[int] = []
    for group in groups:
        top = 4
        assert group["lr_scale"] == pytest.approx(decay ** (top - group["depth"]))
        assert group["lr"] == pytest.approx(lr * decay ** (top - group["depth"]), rel=1e-12)
        for param in group["params"]:
            assert depth_of[id(param)] == group["depth"]
            # BERT's rule: no weight decay on biases and norms.
            assert group["weight_decay"] == (wd if param.ndim >= 2 else 0.0)
            seen.append(id(param))
    assert sorted(seen) == sorted(id(p) for p in model.parameters())  # each once
    assert groups[0]["depth"] == 4 and groups[0]["lr"] == pytest.approx(lr)
    if isinstance(preset, str) and preset == "ulmfit":
        # eta^{l-1} = eta^l / 2.6 between consecutive depths.
        by_depth = {g["depth"]: g["lr"] for g in groups}
        for d in range(4):
            assert by_depth[d] == pytest.approx(by_depth[d + 1] / 2.6)
    if preset == "electra":
        by_depth = {g["depth"]: g["lr"] for g in groups}
        assert by_depth[0] == pytest.approx(lr * 0.8**4)


def test_discriminative_groups_keep_frozen_and_tied_parameters_once() -> None:
    model = TinyTaskModel(small_encoder(num_layers=2))
    model.head.weight.requires_grad_(False)
    model.decoder = nn.Linear(16, 50)  # type: ignore[assignment]
    model.decoder.weight = model.encoder.embeddings.word.weight  # tied output layer
    groups = discriminative_param_groups(
        model, learning_rate=1.0, weight_decay=0.0, layer_decay="electra"
    )
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    assert id(model.head.weight) in ids
    # The tied table serves the top (output) depth, so it takes that rate.
    word = next(
        g for g in groups if any(p is model.encoder.embeddings.word.weight for p in g["params"])
    )
    assert word["depth"] == 3
    optimizer = torch.optim.AdamW(groups, lr=1.0)
    assert len(optimizer.param_groups) == len(groups)


def test_discriminative_groups_reject_bad_decay() -> None:
    model = TinyTaskModel(small_encoder(num_layers=1))
    with pytest.raises(ValueError, match="electra, ulmfit"):
        discriminative_param_groups(model, learning_rate=1.0, weight_decay=0.0, layer_decay="x")
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        discriminative_param_groups(model, learning_rate=1.0, weight_decay=0.0, layer_decay=2.6)


def stlr_by_hand(t: int, total: int, cut_frac: float, ratio: float) -> float:
    cut = math.floor(total * cut_frac)
    p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
    return (1 + p * (ratio - 1)) / ratio


def test_slanted_triangular_matches_eq3_with_the_paper_defaults() -> None:
    param = nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.SGD([{"params": [param], "lr": 0.01}], lr=0.01)
    total = 1000
    scheduler = slanted_triangular(optimizer, total)  # cut_frac=0.1, ratio=32
    rates = []
    for _ in range(total + 1):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[0] == pytest.approx(0.01 / 32)  # start: lr_max / ratio
    assert rates[100] == pytest.approx(0.01)  # cut = floor(1000 * 0.1): the peak
    assert rates[1000] == pytest.approx(0.01 / 32)  # end: back to lr_max / ratio
    assert rates[50] == pytest.approx(0.01 * (1 + 0.5 * 31) / 32)
    assert rates[550] == pytest.approx(0.01 * (1 + 0.5 * 31) / 32)
    for t in (0, 1, 37, 99, 100, 101, 500, 999, 1000):
        assert rates[t] == pytest.approx(0.01 * stlr_by_hand(t, total, 0.1, 32))
    assert max(rates) == rates[100]


def test_slanted_triangular_keeps_per_group_rates_and_never_goes_negative() -> None:
    a, b = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [a], "lr": 1.0}, {"params": [b], "lr": 0.25}])
    scheduler = slanted_triangular(optimizer, 105, cut_frac=0.1, ratio=32)  # cut = 10
    seen = []
    for t in range(106):
        lr_a, lr_b = (g["lr"] for g in optimizer.param_groups)
        assert lr_b == pytest.approx(0.25 * lr_a)
        if t <= 100:
            assert lr_a == pytest.approx(stlr_by_hand(t, 105, 0.1, 32))
        seen.append(lr_a)
        optimizer.step()
        scheduler.step()
    assert min(seen) == pytest.approx(1 / 32)  # Eq. 3 would go negative past t = 100
    with pytest.raises(ValueError, match="at least 10 steps"):
        slanted_triangular(optimizer, 9)


def batches(count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [
        (
            torch.randint(1, 50, (4, 6), generator=generator),
            torch.randint(0, 3, (4,), generator=generator),
        )
        for _ in range(count)
    ]


def train(
    model: TinyTaskModel,
    unfreeze: GradualUnfreezing,
    steps: range,
    optimizer: torch.optim.Optimizer,
) -> dict[int, set[str]]:
    """A Trainer-free loop; returns, per step, the names of parameters that got a gradient."""
    data = batches(steps.stop)
    got_grad: dict[int, set[str]] = {}
    for step in steps:
        unfreeze.on_step_begin(step)
        model(*data[step]).backward()
        unfreeze.on_after_backward(step)
        got_grad[step] = {n for n, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return got_grad


def make_run(seed: int = 0) -> tuple[TinyTaskModel, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = TinyTaskModel(small_encoder(num_layers=2, dropout=0.0, attention_dropout=0.0))
    groups = discriminative_param_groups(model, learning_rate=1e-2, weight_decay=0.1)
    return model, torch.optim.AdamW(groups, lr=1e-2)


def test_gradual_unfreezing_trains_one_more_depth_every_k_steps() -> None:
    model, optimizer = make_run()
    unfreeze = GradualUnfreezing(model, None, every_steps=2)
    assert unfreeze.fully_unfrozen_at == 6  # depths 3 (head), 2, 1, 0
    got_grad = train(model, unfreeze, range(7), optimizer)
    head = {"head.weight", "head.bias"}
    layer = {
        i: {n for n, _ in model.named_parameters() if n.startswith(f"encoder.layers.{i}.")}
        for i in range(2)
    }
    embeddings = {n for n, _ in model.named_parameters() if n.startswith("encoder.embeddings.")}
    assert got_grad[0] == got_grad[1] == head
    assert got_grad[2] == got_grad[3] == head | layer[1]
    assert got_grad[4] == got_grad[5] == head | layer[1] | layer[0]
    # word/position/segment tables: positions and segment rows do not all get used, but
    # every embedding parameter has a gradient tensor once unfrozen.
    assert got_grad[6] == head | layer[1] | layer[0] | embeddings


def test_frozen_depths_stay_bit_identical_despite_weight_decay() -> None:
    model, optimizer = make_run()
    initial = copy.deepcopy(model.state_dict())
    unfreeze = GradualUnfreezing(model, None, every_steps=3)
    train(model, unfreeze, range(3), optimizer)
    after = model.state_dict()
    for name, value in after.items():
        if name.startswith("head."):
            assert not torch.equal(value, initial[name]), name
        else:
            assert torch.equal(value, initial[name]), name  # weight_decay=0.1 did not touch it
    assert all(p.requires_grad == n.startswith("head.") for n, p in model.named_parameters())


def test_gradual_unfreezing_is_a_function_of_the_step_and_resumes_identically() -> None:
    full_model, full_optimizer = make_run()
    full = GradualUnfreezing(full_model, None, every_steps=2)
    train(full_model, full, range(5), full_optimizer)

    model, optimizer = make_run()
    first = GradualUnfreezing(model, None, every_steps=2)
    train(model, first, range(3), optimizer)
    saved_model, saved_optimizer = (
        copy.deepcopy(model.state_dict()),
        copy.deepcopy(optimizer.state_dict()),
    )
    resumed_model, resumed_optimizer = make_run(seed=1)  # different weights, overwritten
    resumed_model.load_state_dict(saved_model)
    resumed_optimizer.load_state_dict(saved_optimizer)
    resumed = GradualUnfreezing(resumed_model, None, every_steps=2)
    train(resumed_model, resumed, range(3, 5), resumed_optimizer)
    for name, value in full_model.state_dict().items():
        assert torch.equal(value, resumed_model.state_dict()[name]), name
    # apply(s) alone sets the state, whatever was applied before.
    full.apply(0)
    assert [p.requires_grad for p in full_model.parameters()] == [
        n.startswith("head.") for n, _ in full_model.named_parameters()
    ]


def test_grad_mask_mode_matches_requires_grad_mode() -> None:
    model_a, opt_a = make_run()
    train(model_a, GradualUnfreezing(model_a, None, every_steps=2), range(5), opt_a)
    model_b, opt_b = make_run()
    masked = GradualUnfreezing(model_b, None, every_steps=2, mode="grad_mask")
    got_grad = train(model_b, masked, range(5), opt_b)
    assert got_grad[0] == {"head.weight", "head.bias"}
    assert all(p.requires_grad for p in model_b.parameters())
    for name, value in model_a.state_dict().items():
        torch.testing.assert_close(model_b.state_dict()[name], value, rtol=1e-6, atol=1e-7)


def test_gradual_unfreezing_leaves_parameters_that_were_frozen_alone() -> None:
    model, _ = make_run()
    model.encoder.embeddings.word.weight.requires_grad_(False)
    unfreeze = GradualUnfreezing(model, None, every_steps=1)
    unfreeze.apply(100)
    assert not model.encoder.embeddings.word.weight.requires_grad
    assert model.encoder.embeddings.position.weight.requires_grad
    with pytest.raises(ValueError, match="every_steps"):
        GradualUnfreezing(model, None, every_steps=0)
