"""ViLBERT: co-attention dependence, schedule checks, region masking rates, no NaN."""

from __future__ import annotations

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import IGNORE_INDEX, MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_multimodal import (
    AlignmentObjective,
    MaskedRegionObjective,
    mask_regions,
    vilbert,
)
from ptm_multimodal.families import INPUT_KEYS

VOCAB = VocabInfo(vocab_size=50, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _model(**overrides):
    args = dict(
        vocab_size=50,
        visual_embedding_dim=12,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        image_hidden_size=8,
        image_num_layers=2,
        image_num_heads=2,
        co_hidden_size=16,
        co_num_heads=2,
        co_attention_after=[[1, 0], [2, 1]],
        max_positions=16,
        dropout=0.0,
        attention_dropout=0.0,
    )
    args.update(overrides)
    torch.manual_seed(0)
    return vilbert(**args).eval()


def _inputs(batch: int = 2, regions: int = 5):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 50, (batch, 6), generator=g)
    feats = torch.randn(batch, regions, 12, generator=g)
    boxes = torch.rand(batch, regions, 5, generator=g)
    return ids, feats, boxes


def test_each_stream_depends_on_the_other() -> None:
    model = _model()
    ids, feats, boxes = _inputs()
    other_ids = ids.clone()
    other_ids[:, 2] = (ids[:, 2] + 1 - 5) % 45 + 5
    with torch.no_grad():
        base = model(ids, feats, visual_boxes=boxes)
        new_image = model(ids, feats + 1.0, visual_boxes=boxes)
        new_text = model(other_ids, feats, visual_boxes=boxes)
    assert not torch.allclose(base.last_hidden_state, new_image.last_hidden_state, atol=1e-4)
    assert not torch.allclose(base.image_hidden_state, new_text.image_hidden_state, atol=1e-4)


def test_masking_every_region_removes_the_image_from_the_text_stream() -> None:
    model = _model()
    ids, feats, boxes = _inputs()
    none = torch.zeros(2, 5, dtype=torch.bool)
    with torch.no_grad():
        a = model(ids, feats, visual_boxes=boxes, visual_mask=none)
        b = model(
            ids, torch.randn_like(feats) * 5, visual_boxes=torch.rand_like(boxes), visual_mask=none
        )
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state, atol=0, rtol=0)
    assert torch.isfinite(a.last_hidden_state).all() and torch.isfinite(a.image_hidden_state).all()
    # masking one image leaves the other row of the batch dependent on its own image
    one = torch.ones(2, 5, dtype=torch.bool)
    one[0] = False
    with torch.no_grad():
        c = model(ids, feats, visual_boxes=boxes, visual_mask=one)
        d = model(ids, feats + 1.0, visual_boxes=boxes, visual_mask=one)
    torch.testing.assert_close(c.last_hidden_state[0], d.last_hidden_state[0], atol=0, rtol=0)
    assert not torch.allclose(c.last_hidden_state[1], d.last_hidden_state[1], atol=1e-4)


def test_global_image_token_summarises_real_regions_only() -> None:
    model = _model()
    ids, feats, boxes = _inputs()
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[:, 3:] = False
    changed = feats.clone()
    changed[:, 3:] = 100.0  # padding regions
    with torch.no_grad():
        a = model(ids, feats, visual_boxes=boxes, visual_mask=mask)
        b = model(ids, changed, visual_boxes=boxes, visual_mask=mask)
    torch.testing.assert_close(a.image_hidden_state[:, :4], b.image_hidden_state[:, :4])
    torch.testing.assert_close(a.last_hidden_state, b.last_hidden_state)


def test_schedule_is_configurable_and_validated() -> None:
    model = _model(co_attention_after=[[0, 0], [2, 2], [2, 2]])
    ids, feats, boxes = _inputs()
    assert model(ids, feats, visual_boxes=boxes).image_hidden_state.shape == (2, 6, 8)
    with pytest.raises(ValueError, match="non-decreasing"):
        _model(co_attention_after=[[2, 1], [1, 2]])
    with pytest.raises(ValueError, match="non-decreasing"):
        _model(co_attention_after=[[3, 0]])


def test_region_masking_rates() -> None:
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(400, 100, 4, generator=g) + 3.0
    real = torch.ones(400, 100, dtype=torch.bool)
    real[:, 90:] = False  # padding is never selected
    corrupted, selected, zeroed = mask_regions(feats, real, g)
    assert not bool(selected[:, 90:].any())
    rate = float(selected.sum() / real.sum())
    zero_share = float(zeroed.sum() / selected.sum())
    kept = selected & ~zeroed
    print(f"regions selected {rate:.4f} (15% +/- 1%), zeroed {zero_share:.4f} (90% +/- 2%)")
    assert abs(rate - 0.15) < 0.01
    assert abs(zero_share - 0.90) < 0.02
    assert bool((corrupted[zeroed] == 0).all())
    torch.testing.assert_close(corrupted[kept], feats[kept])
    torch.testing.assert_close(corrupted[~selected], feats[~selected])


def _pretraining(target: str = "auto"):
    model = _model()
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, model, VOCAB),
            "mrm": MaskedRegionObjective(model, VOCAB, num_classes=7, target=target),
            "align": AlignmentObjective(model, VOCAB),
        }
    )
    return PretrainingModel(model, mix, input_keys=INPUT_KEYS).train(), mix


def _batch(batch: int = 64, regions: int = 10):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 50, (batch, 12), generator=g)
    ids[:, 0], ids[:, -1] = VOCAB.cls_id, VOCAB.sep_id
    special = torch.zeros_like(ids)
    special[:, 0] = special[:, -1] = 1
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "special_tokens_mask": special,
        "visual_features": torch.randn(batch, regions, 12, generator=g),
        "visual_boxes": torch.rand(batch, regions, 5, generator=g),
        "visual_mask": torch.ones(batch, regions, dtype=torch.bool),
        "visual_classes": torch.softmax(torch.randn(batch, regions, 7, generator=g), -1),
        "match_label": torch.randint(0, 2, (batch,), generator=g),
    }


def test_text_masking_in_the_vilbert_collate_is_80_10_10() -> None:
    _, mix = _pretraining()
    raw = _batch(batch=2000)
    out = mix.collate(raw, torch.Generator().manual_seed(5))
    selected = out["mlm_labels"] != IGNORE_INDEX
    candidates = raw["special_tokens_mask"] == 0
    rate = float(selected.sum() / candidates.sum())
    masked = float((out["input_ids"][selected] == VOCAB.mask_id).float().mean())
    same = float((out["input_ids"][selected] == raw["input_ids"][selected]).float().mean())
    print(f"text selected {rate:.4f}; [MASK] {masked:.4f}, unchanged {same:.4f}")
    assert abs(rate - 0.15) < 0.01
    assert abs(masked - 0.80) < 0.02
    # unchanged = the 10% kept + random draws that hit the same id (1/45 of 10%)
    assert abs(same - (0.10 + 0.10 / 45)) < 0.02


@pytest.mark.parametrize("target", ["classes", "features"])
def test_losses_are_finite_and_backpropagate(target: str) -> None:
    model, mix = _pretraining(target)
    batch = mix.collate(_batch(), torch.Generator().manual_seed(2))
    out = model(batch)
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert out.metrics["mrm/regions"] > 0
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_no_nan_when_no_region_is_selected() -> None:
    model, mix = _pretraining("classes")
    mix.objectives["mrm"].mask_prob = 0.0
    batch = mix.collate(_batch(batch=4), torch.Generator().manual_seed(3))
    assert not bool(batch["region_selected"].any())
    out = model(batch)
    assert float(out.metrics["mrm/loss"]) == 0.0 and torch.isfinite(out.loss)
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_the_text_stream_runs_through_the_encoder_seam() -> None:
    """Co-attention sits between the text encoder's layers through its seam, so the
    encoder's settings hold there too: unpadded text gives the padded result at real
    tokens (zeros at padding, which only the unpadded path writes)."""
    from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings

    ids, feats, boxes = _inputs()
    mask = torch.ones_like(ids)
    mask[1, 2:] = 0
    outputs = {}
    for mode in ("off", "on"):
        model = _model()
        apply_execution_settings(model, ExecutionSettings(unpadding=mode))
        with torch.no_grad():
            out = model(ids, feats, attention_mask=mask, visual_boxes=boxes)
        outputs[mode] = (out.last_hidden_state, out.image_hidden_state)
    real = mask.bool()
    torch.testing.assert_close(outputs["on"][0][real], outputs["off"][0][real], atol=1e-5, rtol=0)
    torch.testing.assert_close(outputs["on"][1], outputs["off"][1], atol=1e-5, rtol=0)
    assert bool((outputs["on"][0][~real] == 0).all())
    assert not bool((outputs["off"][0][~real] == 0).all())
