"""LXMERT parity with Hugging Face transformers (import and export), fp32, eval mode."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_multimodal.lxmert_hf import hf_lxmert_to_ptm, load_hf_lxmert, save_hf_lxmert

transformers = pytest.importorskip("transformers")

TOL = 1e-5
CONFIG = dict(
    vocab_size=40,
    hidden_size=32,
    num_attention_heads=4,
    intermediate_size=48,
    l_layers=2,
    r_layers=2,
    x_layers=2,
    visual_feat_dim=12,
    visual_pos_dim=4,
    max_position_embeddings=24,
    num_qa_labels=7,
    num_object_labels=9,
    num_attr_labels=5,
)


def _hf_model(cls_name: str):
    torch.manual_seed(0)
    config = transformers.LxmertConfig(**CONFIG)
    model = getattr(transformers, cls_name)(config).eval()
    with torch.no_grad():  # random biases and norms, so that no mapping error hides at 0/1
        for name, param in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name or name.endswith("bias"):
                param.add_(torch.randn_like(param) * 0.1)
    return model


def _inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 40, (3, 7), generator=g)
    attention = torch.ones(3, 7, dtype=torch.long)
    attention[1, 5:] = 0
    feats = torch.randn(3, 6, 12, generator=g)
    boxes = torch.rand(3, 6, 4, generator=g)
    visual_mask = torch.ones(3, 6, dtype=torch.long)
    visual_mask[2, 4:] = 0
    types = torch.zeros(3, 7, dtype=torch.long)
    types[0, 4:] = 1
    return ids, attention, types, feats, boxes, visual_mask


def _ptm(wrapped: PretrainingModel, inputs):
    ids, attention, types, feats, boxes, visual_mask = inputs
    return wrapped.encoder(
        ids,
        feats,
        attention_mask=attention,
        token_type_ids=types,
        visual_boxes=boxes,
        visual_mask=visual_mask,
    )


def _hf(model, inputs):
    ids, attention, types, feats, boxes, visual_mask = inputs
    return model(
        input_ids=ids,
        attention_mask=attention,
        token_type_ids=types,
        visual_feats=feats,
        visual_pos=boxes,
        visual_attention_mask=visual_mask,
    )


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape
    assert (a - b).abs().max().item() <= TOL, (a - b).abs().max().item()


@torch.no_grad()
def test_lxmert_model_matches_transformers_and_exports_back(tmp_path: Path) -> None:
    hf = _hf_model("LxmertModel")
    hf.save_pretrained(tmp_path / "hf")
    wrapped = load_hf_lxmert(tmp_path / "hf").eval()
    inputs = _inputs()
    ours, theirs = _ptm(wrapped, inputs), _hf(hf, inputs)
    _close(ours.last_hidden_state, theirs.language_output)
    _close(ours.vision_hidden_state, theirs.vision_output)
    _close(ours.pooled_output, theirs.pooled_output)
    assert save_hf_lxmert(wrapped, tmp_path / "back") == "LxmertModel"
    back = transformers.LxmertModel.from_pretrained(tmp_path / "back").eval()
    again = _hf(back, inputs)
    _close(again.language_output, theirs.language_output)
    _close(again.vision_output, theirs.vision_output)
    _close(again.pooled_output, theirs.pooled_output)


@torch.no_grad()
def test_lxmert_pretraining_heads_match_transformers_and_export_back(tmp_path: Path) -> None:
    hf = _hf_model("LxmertForPreTraining")
    hf.save_pretrained(tmp_path / "hf")
    wrapped = load_hf_lxmert(tmp_path / "hf").eval()
    assert sorted(wrapped.objectives.objectives) == ["itm", "lm", "obj", "qa"]
    inputs = _inputs(2)
    encoded = _ptm(wrapped, inputs)
    theirs = _hf(hf, inputs)
    heads = wrapped.objectives.objectives
    _close(heads["lm"].logits(encoded), theirs.prediction_logits)
    _close(heads["itm"].logits(encoded), theirs.cross_relationship_score)
    _close(heads["qa"].logits(encoded), theirs.question_answering_score)
    hf_vision = _hf(hf.lxmert, inputs).vision_output
    hf_obj = hf.obj_predict_head(hf_vision)
    ours_obj = heads["obj"].logits(encoded)
    assert sorted(ours_obj) == sorted(hf_obj) == ["attr", "feat", "obj"]
    for key in hf_obj:
        _close(ours_obj[key], hf_obj[key])
    # export back: the same logits from transformers
    assert save_hf_lxmert(wrapped, tmp_path / "back") == "LxmertForPreTraining"
    back = transformers.LxmertForPreTraining.from_pretrained(tmp_path / "back").eval()
    again = _hf(back, inputs)
    _close(again.prediction_logits, theirs.prediction_logits)
    _close(again.cross_relationship_score, theirs.cross_relationship_score)
    _close(again.question_answering_score, theirs.question_answering_score)
    back_vision = _hf(back.lxmert, inputs).vision_output
    _close(back_vision, hf_vision)
    back_obj = back.obj_predict_head(back_vision)
    for key in hf_obj:
        _close(back_obj[key], hf_obj[key])


def test_a_missing_tensor_is_named() -> None:
    state = _hf_model("LxmertModel").state_dict()
    del state["encoder.x_layers.1.visual_attention.att.key.weight"]
    _, missing, _ = hf_lxmert_to_ptm(state, CONFIG)
    assert missing == ["encoder.x_layers.1.visual_attention.att.key.weight"]
