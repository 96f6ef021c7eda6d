"""Unpadding: the stack on packed real tokens equals the padded stack at real positions."""

from __future__ import annotations

import itertools

import pytest
import torch

from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_core.encoders.layers import standard_norm
from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.unpadding import AUTO_MIN_PADDING, UNPADDING_MODES
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from ptm_core.modules.unpadding import UnpadLayout

TOL = 1e-5
SIZE = dict(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)


def encoder(**switches) -> TransformerEncoder:
    torch.manual_seed(0)
    settings = dict(SIZE, dropout=0.0, attention_dropout=0.0)
    settings.update(switches)
    return bert_encoder(**settings)


def masks() -> dict[str, torch.Tensor]:
    right = torch.ones(4, 12, dtype=torch.long)
    right[0, 7:] = 0
    right[1, 3:] = 0
    right[3, 1:] = 0  # a row of length 1
    left = right.flip(1)
    ragged = torch.ones(4, 12, dtype=torch.bool)
    ragged[0, 2:5] = False
    ragged[1, ::2] = False
    ragged[2, 11] = False
    ragged[3, :11] = False
    return {"right": right, "left": left, "ragged": ragged, "none_padded": torch.ones(4, 12)}


def run(model: TransformerEncoder, mode: str, ids: torch.Tensor, mask: torch.Tensor):
    """Outputs and the parameter gradients of a loss over real positions only."""
    apply_execution_settings(model, ExecutionSettings(unpadding=mode))
    model.zero_grad(set_to_none=True)
    out = model(ids, mask, output_hidden_states=True)
    real = mask.bool()
    weights = torch.linspace(-1.0, 1.0, out.last_hidden_state.shape[-1])
    loss = sum((state[real] * weights).pow(2).mean() for state in out.hidden_states[1:])
    loss = loss + (out.last_hidden_state[real] * weights).sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out, grads


VARIANTS = {
    "bert_post_ln": {},
    "pre_ln": {"norm_position": "pre"},
    "albert_shared": {"share_layers": "all", "embedding_size": 16},
    "factorised": {"embedding_size": 16},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("mask_kind", list(masks()))
def test_unpadded_equals_padded_at_real_positions(variant: str, mask_kind: str) -> None:
    model = encoder(**VARIANTS[variant])
    mask = masks()[mask_kind]
    ids = torch.randint(5, 50, mask.shape, generator=torch.Generator().manual_seed(1))
    padded, padded_grads = run(model, "off", ids, mask)
    unpadded, unpadded_grads = run(model, "on", ids, mask)
    real = mask.bool()
    torch.testing.assert_close(
        unpadded.last_hidden_state[real], padded.last_hidden_state[real], atol=TOL, rtol=0
    )
    assert len(unpadded.hidden_states) == len(padded.hidden_states) == SIZE["num_layers"] + 1
    for ours, reference in zip(unpadded.hidden_states, padded.hidden_states, strict=True):
        torch.testing.assert_close(ours[real], reference[real], atol=TOL, rtol=0)
    assert padded_grads.keys() == unpadded_grads.keys()
    for name, grad in padded_grads.items():
        torch.testing.assert_close(unpadded_grads[name], grad, atol=TOL, rtol=1e-4, msg=name)
    if not bool(real.all()):
        assert bool((unpadded.last_hidden_state[~real] == 0).all())


def test_layout_round_trip_on_arbitrary_masks() -> None:
    mask = masks()["ragged"]
    layout = UnpadLayout.from_mask(mask)
    assert layout.num_tokens == int(mask.sum())
    assert layout.cu_seqlens.dtype == torch.int32
    assert layout.cu_seqlens.tolist() == [0, *mask.sum(1).cumsum(0).tolist()]
    assert layout.max_seqlen == int(mask.sum(1).max())
    x = torch.randn(4, 12, 3)
    packed = layout.unpad(x)
    torch.testing.assert_close(packed, x[mask])
    back = layout.repad(packed)
    torch.testing.assert_close(back[mask], x[mask])
    assert bool((back[~mask] == 0).all())
    with pytest.raises(ValueError, match="no real token"):
        UnpadLayout.from_mask(torch.zeros(2, 3))


def test_train_mode_with_dropout_runs_forward_and_backward() -> None:
    model = encoder(dropout=0.1, attention_dropout=0.1).train()
    apply_execution_settings(model, ExecutionSettings(unpadding="on"))
    mask = masks()["ragged"]
    out = model(torch.randint(5, 50, mask.shape), mask)
    out.last_hidden_state[mask].pow(2).mean().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_auto_unpads_only_from_the_threshold() -> None:
    model = encoder().eval()
    ids = torch.randint(5, 50, (2, 20))
    few = torch.ones(2, 20)
    few[0, -1] = 0  # 2.5% padding: padded path, padding positions hold values
    many = torch.ones(2, 20)
    many[:, 20 - int(20 * AUTO_MIN_PADDING) - 2 :] = 0  # above the threshold: zeros
    assert model.unpadding_mode == "auto"
    with torch.no_grad():
        assert model(ids, few).last_hidden_state[0, -1].abs().sum() > 0
        assert bool((model(ids, many).last_hidden_state[~many.bool()] == 0).all())
        apply_execution_settings(model, ExecutionSettings(unpadding="off"))
        assert model(ids, many).last_hidden_state[~many.bool()].abs().sum() > 0


def test_paths_that_keep_padding() -> None:
    """Visibility masks, attention scores and T5's bucketed bias take the padded path."""
    ids = torch.randint(5, 50, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[:, 4:] = False
    model = encoder().eval()
    apply_execution_settings(model, ExecutionSettings(unpadding="on"))
    with torch.no_grad():
        visibility = mask[:, None, :].expand(-1, 8, -1)
        assert model(ids, visibility).last_hidden_state[~mask].abs().sum() > 0
        out = model(ids, mask, output_attention_scores=True)
        assert out.attention_scores is not None
        assert out.last_hidden_state[~mask].abs().sum() > 0
        bucketed = EncoderConfig(**SIZE, position_encoding="bucketed", norm_position="pre")
        t5 = TransformerEncoder(bucketed, norm=lambda: standard_norm(bucketed, "rmsnorm")).eval()
        apply_execution_settings(t5, ExecutionSettings(unpadding="on"))
        assert t5(ids, mask).last_hidden_state[~mask].abs().sum() > 0


def test_bad_mode_names_the_valid_ones() -> None:
    model = encoder()
    with pytest.raises(ValueError, match="auto, on, off"):
        apply_execution_settings(model, ExecutionSettings(unpadding="yes"))
    with pytest.raises(ValueError, match="auto, on, off"):
        TransformerEncoder(model.config, settings=ExecutionSettings(unpadding="always"))
    assert UNPADDING_MODES == ("auto", "on", "off")


def test_masked_lm_training_step_same_loss() -> None:
    from ptm_core.models import PretrainingModel
    from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.tokenization import VocabInfo

    vocab = VocabInfo(50, 0, 1, 2, 3, 4)
    losses = {}
    for mode in ("off", "on"):
        model_encoder = encoder()
        torch.manual_seed(1)
        mlm = build_objective(MaskedLMObjective, model_encoder, vocab)
        model = PretrainingModel(model_encoder, ObjectiveMix({"mlm": mlm}))
        apply_execution_settings(model, ExecutionSettings(unpadding=mode))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        gen = torch.Generator().manual_seed(2)
        mask = masks()["right"]
        ids = torch.randint(5, 50, mask.shape, generator=gen)
        labels = torch.full_like(ids, -100)
        labels[mask.bool() & (torch.rand(mask.shape, generator=gen) < 0.4)] = 7
        batch = {"input_ids": ids, "attention_mask": mask, "mlm_labels": labels}
        steps = []
        for _ in range(2):
            loss = model(batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            steps.append(loss.item())
        losses[mode] = steps
    assert losses["on"] == pytest.approx(losses["off"], abs=TOL)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_varlen_attention_matches_padded() -> None:
    model = encoder().cuda().eval()
    mask = masks()["ragged"].cuda()
    ids = torch.randint(5, 50, mask.shape, device="cuda")
    real = mask.bool()
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        apply_execution_settings(model, ExecutionSettings(unpadding="off"))
        padded = model(ids, mask).last_hidden_state.float()
        apply_execution_settings(model, ExecutionSettings(unpadding="on"))
        unpadded = model(ids, mask).last_hidden_state.float()
    torch.testing.assert_close(unpadded[real], padded[real], atol=3e-2, rtol=3e-2)


def test_length_groups_cut_only_where_attention_area_drops() -> None:
    from ptm_core.modules.unpadding import plan_length_groups

    assert plan_length_groups([128] * 8) == [list(range(8))]
    assert plan_length_groups([128, 127, 126, 125]) == [[0, 1, 2, 3]]  # saves < 10%
    spread = [51, 128, 73, 95, 62, 117, 84, 106]  # 0.4 L .. L, shuffled
    groups = plan_length_groups(spread)
    assert 2 <= len(groups) <= 4
    assert sorted(row for group in groups for row in group) == list(range(8))
    longest = [max(spread[row] for row in group) for group in groups]
    assert longest == sorted(longest, reverse=True)
    for first, second in itertools.pairwise(groups):  # runs of the sorted lengths
        assert min(spread[r] for r in first) >= max(spread[r] for r in second)
    area = sum(len(group) * max(spread[r] for r in group) ** 2 for group in groups)
    assert area < 0.8 * 8 * 128**2
    assert len(plan_length_groups(spread, max_groups=2)) == 2
    assert plan_length_groups([5, 0, 0]) == [[0], [1, 2]]


def test_grouped_layout_places_every_token_in_its_own_slot() -> None:
    mask = torch.zeros(6, 20, dtype=torch.bool)
    for row, length in enumerate([20, 3, 11, 0, 19, 4]):
        mask[row, :length] = True
    layout = UnpadLayout.from_mask(mask)
    assert len(layout.groups) > 1
    slots = layout.compact_indices.tolist()
    assert len(set(slots)) == len(slots) == int(mask.sum())
    assert max(slots) < layout.compact_size
    for group in layout.groups:
        assert group.key_mask is None or group.key_mask.shape == (group.rows, 1, 1, group.slots)
    assert layout.compact_size < 6 * 20
