"""VisualBERT beyond parity: box positions, padding regions, table layout."""

from __future__ import annotations

import pytest
import torch

from ptm_multimodal import visualbert


def _model(**overrides):
    torch.manual_seed(0)
    args = dict(
        vocab_size=40,
        visual_embedding_dim=8,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=10,
        dropout=0.0,
        attention_dropout=0.0,
    )
    args.update(overrides)
    return visualbert(**args).eval()


def test_visual_rows_extend_the_core_tables_and_start_as_copies() -> None:
    model = _model()
    emb = model.encoder.embeddings
    assert emb.position.weight.shape[0] == 11 and emb.token_type.weight.shape[0] == 4
    torch.testing.assert_close(emb.position.weight[10], emb.position.weight[0])
    torch.testing.assert_close(emb.token_type.weight[2:], emb.token_type.weight[:2])


def test_boxes_matter_and_padding_regions_do_not() -> None:
    model = _model()
    ids = torch.tensor([[2, 7, 8, 3], [2, 9, 3, 0]])
    text_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    feats = torch.randn(2, 3, 8)
    boxes = torch.rand(2, 3, 5)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    with torch.no_grad():
        base = model(ids, feats, attention_mask=text_mask, visual_boxes=boxes, visual_mask=mask)
        moved = model(
            ids, feats, attention_mask=text_mask, visual_boxes=boxes.flip(1), visual_mask=mask
        )
        padded = feats.clone()
        padded[1, 2] = 50.0
        pad = model(ids, padded, attention_mask=text_mask, visual_boxes=boxes, visual_mask=mask)
    assert base.last_hidden_state.shape == (2, 7, 16)
    assert not torch.allclose(
        base.last_hidden_state[:, 0], moved.last_hidden_state[:, 0], atol=1e-4
    )
    torch.testing.assert_close(pad.last_hidden_state[1, :6], base.last_hidden_state[1, :6])


def test_missing_boxes_and_long_captions_are_clear_errors() -> None:
    model = _model()
    with pytest.raises(ValueError, match="pass visual_boxes"):
        model(torch.tensor([[2, 3]]), torch.zeros(1, 2, 8))
    with pytest.raises(ValueError, match="exceeds text_positions=10"):
        model(
            torch.ones(1, 11, dtype=torch.long),
            torch.zeros(1, 2, 8),
            visual_boxes=torch.zeros(1, 2, 5),
        )
