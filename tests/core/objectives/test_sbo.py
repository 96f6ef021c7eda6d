"""Span Boundary Objective: the head reads only the boundaries and the relative position."""

from __future__ import annotations

import pytest
import torch
from cases import ObjectiveTestCase, token_batch
from test_whole_word import SAMPLE_VOCAB

from ptm_core import bert_encoder
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.span_boundary import SpanBoundaryHead
from ptm_core.objectives import IGNORE_INDEX, SpanBoundaryObjective, SpanMaskingObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer

VOCAB = VocabInfo(vocab_size=50, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _encoder():
    return bert_encoder(vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=1, num_heads=2)


def test_head_is_a_two_layer_gelu_layernorm_mlp_with_a_tied_decoder() -> None:
    encoder = _encoder()
    head = SpanBoundaryHead(16, VOCAB.vocab_size, max_positions=8, tie_to=encoder.word_embeddings)
    assert head.decoder.weight is encoder.word_embeddings.weight
    left, right = torch.randn(5, 16), torch.randn(5, 16)
    positions = torch.tensor([0, 1, 2, 7, 30])  # 30 is clipped to the last entry
    logits = head(left, right, positions)
    assert logits.shape == (5, VOCAB.vocab_size)
    h = torch.cat([left, right, head.position_embeddings(positions.clamp(max=7))], dim=-1)
    h = head.norm1(torch.nn.functional.gelu(head.dense1(h)))
    h = head.norm2(torch.nn.functional.gelu(head.dense2(h)))
    torch.testing.assert_close(logits, head.decoder(h))
    with pytest.raises(ValueError, match="tie"):
        SpanBoundaryHead(16, VOCAB.vocab_size + 1, tie_to=encoder.word_embeddings)


def _batch() -> dict[str, torch.Tensor]:
    # One row: [CLS] a b [c d e] f [SEP]; the span is positions 3..5, boundaries 2 and 6.
    labels = torch.full((1, 8), IGNORE_INDEX)
    labels[0, 3:6] = torch.tensor([10, 11, 12])
    left = torch.zeros(1, 8, dtype=torch.long)
    right = torch.zeros(1, 8, dtype=torch.long)
    position = torch.zeros(1, 8, dtype=torch.long)
    left[0, 3:6], right[0, 3:6], position[0, 3:6] = 2, 6, torch.tensor([0, 1, 2])
    return {"mlm_labels": labels, "span_left": left, "span_right": right, "span_position": position}


def test_the_loss_depends_on_boundary_states_only() -> None:
    objective = build_objective(SpanBoundaryObjective, _encoder(), VOCAB)
    hidden = torch.randn(1, 8, 16)
    base = objective(EncoderOutput(hidden), _batch()).loss
    inside = hidden.clone()
    inside[0, 3:6] += 5.0  # the masked tokens' own states do not matter
    inside[0, [0, 1, 7]] -= 3.0  # nor do tokens outside the boundaries
    torch.testing.assert_close(objective(EncoderOutput(inside), _batch()).loss, base)
    boundary = hidden.clone()
    boundary[0, 6] += 1.0
    assert not torch.allclose(objective(EncoderOutput(boundary), _batch()).loss, base)


def test_loss_trains_and_missing_span_keys_name_the_fix() -> None:
    objective = build_objective(SpanBoundaryObjective, _encoder(), VOCAB)
    hidden = torch.randn(1, 8, 16, requires_grad=True)
    out = objective(EncoderOutput(hidden), _batch())
    out.loss.backward()
    assert hidden.grad is not None and hidden.grad[0, [2, 6]].abs().sum() > 0
    assert hidden.grad[0, 3:6].abs().sum() == 0
    assert out.metrics["predictions"].item() == 3
    with pytest.raises(KeyError, match="SpanMaskingObjective"):
        objective(EncoderOutput(hidden), {"mlm_labels": _batch()["mlm_labels"]})


class TestSpanBoundaryContract(ObjectiveTestCase):
    """SBO reads the span keys that SpanBERT's masking writes; its input is a masked batch."""

    objective_cls = SpanBoundaryObjective
    vocab = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB).vocab_info

    def make_input(self) -> dict[str, torch.Tensor]:
        encoder = self.make_encoder()
        masking = build_objective(SpanMaskingObjective, encoder, self.vocab, tokenizer=SAMPLE_VOCAB)
        return masking.collate(token_batch(self.vocab, length=24), torch.Generator().manual_seed(0))
