"""CoVe's attentional decoder: Luong global attention with input feeding."""

from __future__ import annotations

import pytest
import torch

from ptm_classic.cove.decoder import AttentionalDecoder, GlobalAttention


def test_attention_is_a_softmax_over_the_unmasked_source_and_matches_its_formula() -> None:
    torch.manual_seed(0)
    attention = GlobalAttention(6)
    query, context = torch.randn(3, 6), torch.randn(3, 5, 6)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    out, weights = attention(query, context, mask)
    assert out.shape == (3, 6) and weights.shape == (3, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert (weights[~mask] == 0).all() and (weights[2, 0] == 1).all()
    # a = softmax(H W_1 q); h~ = tanh(W_2 [H^T a; q]), by hand for row 1.
    scores = context[1, :2] @ (attention.linear_in.weight @ query[1])
    a = torch.softmax(scores, 0)
    expected = torch.tanh(attention.linear_out.weight @ torch.cat([a @ context[1, :2], query[1]]))
    assert torch.allclose(out[1], expected, atol=1e-6)
    assert torch.allclose(weights[1, :2], a, atol=1e-6)


def test_decoder_shapes_softmax_and_teacher_forcing() -> None:
    torch.manual_seed(0)
    decoder = AttentionalDecoder(11, 4, 8, num_layers=2).eval()
    context = torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    h0, c0 = torch.randn(2, 2, 8), torch.randn(2, 2, 8)
    targets = torch.tensor([[3, 4, 5, 0], [3, 6, 7, 8]])
    out = decoder(targets, context, mask, h0, c0)
    assert out.logits.shape == (2, 4, 11) and out.attention.shape == (2, 4, 5)
    assert torch.allclose(out.attention.sum(-1), torch.ones(2, 4))
    assert (out.attention[0, :, 3:] == 0).all()
    probs = out.logits.softmax(-1)
    assert torch.allclose(probs.sum(-1), torch.ones(2, 4))
    # Step t depends on targets[:t+1] only: changing the last input changes the last step only.
    changed = targets.clone()
    changed[:, -1] = 9
    again = decoder(changed, context, mask, h0, c0)
    assert torch.allclose(again.logits[:, :3], out.logits[:, :3])
    assert not torch.allclose(again.logits[:, 3], out.logits[:, 3])


def test_decoder_refuses_a_start_state_of_the_wrong_size() -> None:
    decoder = AttentionalDecoder(5, 4, 8, num_layers=2)
    with pytest.raises(ValueError, match="must match the decoder"):
        decoder(
            torch.zeros(1, 2, dtype=torch.long),
            torch.zeros(1, 3, 8),
            torch.ones(1, 3, dtype=torch.bool),
            torch.zeros(1, 1, 8),
            torch.zeros(1, 1, 8),
        )
