"""Attention probabilities against transformers' eager attention on an imported random BERT,
entropy and attention mass on hand-computed cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import transformers

from ptm_core.analysis.attention import AttentionAccumulator, attention_probabilities, entropy
from ptm_core.checkpoints.encoder import load_encoder


def _hf_bert(directory: Path) -> transformers.BertModel:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=50,
        hidden_size=24,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = transformers.BertModel(config, add_pooling_layer=False)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # off the init, so attention is far from uniform
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    return model.eval()


def test_probabilities_match_transformers_eager(tmp_path: Path) -> None:
    reference = _hf_bert(tmp_path)
    encoder = load_encoder(tmp_path).eval()
    ids = torch.randint(1, 50, (3, 9), generator=torch.Generator().manual_seed(2))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    ours = attention_probabilities(encoder, ids, mask)
    assert len(ours) == len(expected) == 3
    real = mask.bool()
    for got, want in zip(ours, expected, strict=True):
        assert got.shape == want.shape == (3, 3, 9, 9)
        # rows of real queries; padded keys get 0 in both
        diff = (got - want).abs().permute(0, 2, 1, 3)[real]
        assert diff.max().item() < 1e-5
        assert got.permute(0, 2, 1, 3)[real].sum(-1).sub(1).abs().max() < 1e-5
    # far from uniform, so the check compares something
    assert entropy(ours[0]).permute(0, 2, 1)[real].min() < math.log(9) - 0.5


def test_entropy_by_hand() -> None:
    probs = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4])
    assert entropy(probs).tolist() == pytest.approx([math.log(2), 0.0, math.log(4)])


def test_accumulator_by_hand() -> None:
    # one sentence [CLS] a [SEP] + 1 padding; one layer, two heads
    ids = torch.tensor([[101, 7, 102, 0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    head0 = torch.tensor(
        [[1.0, 0, 0, 0], [0.5, 0.5, 0, 0], [0, 0, 1.0, 0], [0.3, 0.3, 0.4, 0]]
    )  # last row is a padded query: ignored
    head1 = torch.full((4, 4), 1 / 3).masked_fill(torch.arange(4) == 3, 0.0)
    probs = [torch.stack([head0, head1])[None]]  # (1, 2, 4, 4)
    stats = AttentionAccumulator(cls_id=101, sep_id=102)
    stats.add(probs, ids, mask, marked=ids == 7)
    result = stats.result()
    assert result.queries == 3
    tables = {k: v.squeeze(0).tolist() for k, v in result.tables.items()}
    assert tables["entropy"] == pytest.approx([math.log(2) / 3, math.log(3)])
    assert tables["cls"] == pytest.approx([1.5 / 3, 1 / 3])
    assert tables["sep"] == pytest.approx([1 / 3, 1 / 3])
    assert tables["self"] == pytest.approx([2.5 / 3, 1 / 3])
    assert tables["marked"] == pytest.approx([0.5 / 3, 1 / 3])
    assert result.uniform_entropy == pytest.approx(math.log(3))


def test_xlnet_is_refused() -> None:
    from ptm_core.encoders.presets import xlnet_tiny

    with pytest.raises(ValueError, match=r"XLNetEncoder.*no explicit attention path"):
        attention_probabilities(xlnet_tiny(), torch.zeros(1, 2, dtype=torch.long))


def test_rotary_local_attention_matches_transformers_modernbert(tmp_path: Path) -> None:
    """ModernBERT: rotary queries/keys, and a local window of 4 positions to each side on
    rows longer than it (the window is part of the layer's mask)."""
    config = transformers.ModernBertConfig(
        vocab_size=97,
        hidden_size=48,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=64,
        local_attention=8,
        global_attn_every_n_layers=2,
        global_rope_theta=1000.0,
        local_rope_theta=77.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        cls_token_id=1,
        sep_token_id=2,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    reference = transformers.ModernBertModel(config)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=g))
    reference.save_pretrained(tmp_path)
    encoder = load_encoder(tmp_path).eval()
    ids = torch.randint(3, 97, (2, 21), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    ids = ids.masked_fill(mask == 0, 0)
    with torch.no_grad():
        expected = reference.eval()(
            input_ids=ids, attention_mask=mask, output_attentions=True
        ).attentions
    ours = attention_probabilities(encoder, ids, mask)
    real = mask.bool()
    for layer, (got, want) in enumerate(zip(ours, expected, strict=True)):
        diff = (got - want).abs().permute(0, 2, 1, 3)[real]
        assert diff.max().item() < 1e-5, layer
    # a local layer (1) gives no mass beyond the window; a global one (0) does
    assert ours[1][0, :, 10, 15:].abs().max() == 0.0
    assert ours[0][0, :, 10, 15:].sum() > 0.0
