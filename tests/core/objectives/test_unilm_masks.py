"""UniLM / GPT attention masks: each exposes exactly the intended positions."""

from __future__ import annotations

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core import bert_encoder
from ptm_core.modules import (
    UNILM_MASK_KINDS,
    bidirectional_mask,
    left_to_right_mask,
    right_to_left_mask,
    seq2seq_mask,
    unilm_mask,
)
from ptm_core.objectives import UniLMObjective
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=60, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
# [CLS] s s [SEP] t t t [SEP] [PAD] [PAD]: source 0..3, target 4..7.
IDS = torch.tensor([[2, 10, 11, 3, 20, 21, 22, 3, 0, 0]])
TYPES = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 1, 0, 0]])
PADDING = (IDS != 0).long()
REAL = 8


@pytest.fixture(scope="module")
def encoder():
    torch.manual_seed(0)
    model = bert_encoder(
        vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=2, num_heads=2, dropout=0.0
    )
    return model.eval()


def _out(encoder, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return encoder(ids, attention_mask=mask, token_type_ids=TYPES).last_hidden_state[0]


def _changed(ids: torch.Tensor, pos: int) -> torch.Tensor:
    other = ids.clone()
    other[0, pos] = 40 + pos
    return other


def test_masks_expose_exactly_the_intended_pairs() -> None:
    i = torch.arange(10)[:, None]
    j = torch.arange(10)[None, :]
    real = (i < REAL) & (j < REAL)
    assert torch.equal(bidirectional_mask(PADDING)[0], real)
    assert torch.equal(left_to_right_mask(PADDING)[0], real & (j <= i))
    assert torch.equal(right_to_left_mask(PADDING)[0], real & (j >= i))
    s2s = seq2seq_mask(TYPES, PADDING)[0]
    source_i, source_j = i < 4, j < 4
    expected = real & (source_j | (~source_i & (j <= i)))
    assert torch.equal(s2s, expected)
    assert not s2s[:4, 4:].any()  # the source never sees the target
    for kind in UNILM_MASK_KINDS:  # padding rows and columns hidden in every kind
        mask = unilm_mask(kind, PADDING, TYPES)
        assert mask.dtype == torch.bool and mask.shape == (1, 10, 10)
        assert not mask[0, REAL:].any() and not mask[0, :, REAL:].any()
    with pytest.raises(ValueError, match="valid kinds"):
        unilm_mask("diagonal", PADDING)
    with pytest.raises(ValueError, match="token_type_ids"):
        unilm_mask("seq2seq", PADDING)


def test_left_to_right_output_ignores_future_tokens(encoder) -> None:
    mask = left_to_right_mask(PADDING)
    base = _out(encoder, IDS, mask)
    changed = _out(encoder, _changed(IDS, 5), mask)
    torch.testing.assert_close(changed[:5], base[:5])  # before the change: identical
    assert not torch.allclose(changed[5:REAL], base[5:REAL])


def test_right_to_left_output_ignores_past_tokens(encoder) -> None:
    mask = right_to_left_mask(PADDING)
    base = _out(encoder, IDS, mask)
    changed = _out(encoder, _changed(IDS, 5), mask)
    torch.testing.assert_close(changed[6:REAL], base[6:REAL])
    assert not torch.allclose(changed[:6], base[:6])


def test_seq2seq_target_sees_all_source_and_only_its_prefix(encoder) -> None:
    mask = seq2seq_mask(TYPES, PADDING)
    base = _out(encoder, IDS, mask)
    # A later target token does not change earlier target outputs nor any source output.
    later = _out(encoder, _changed(IDS, 6), mask)
    torch.testing.assert_close(later[:6], base[:6])
    assert not torch.allclose(later[6], base[6])
    # Every source token (even the last one) changes every target output.
    for pos in (1, 2):
        changed = _out(encoder, _changed(IDS, pos), mask)
        for target in range(4, REAL):
            assert not torch.allclose(changed[target], base[target]), (pos, target)


def test_padding_does_not_change_real_outputs(encoder) -> None:
    for kind in UNILM_MASK_KINDS:
        mask = unilm_mask(kind, PADDING, TYPES)
        padded = _out(encoder, IDS, mask)[:REAL]
        with torch.no_grad():
            short = encoder(
                IDS[:, :REAL],
                attention_mask=unilm_mask(kind, PADDING[:, :REAL], TYPES[:, :REAL]),
                token_type_ids=TYPES[:, :REAL],
            ).last_hidden_state[0]
        torch.testing.assert_close(padded, short, atol=1e-5, rtol=1e-5)


def test_unilm_draws_mask_kinds_with_the_configured_proportions(encoder) -> None:
    objective = build_objective(UniLMObjective, encoder, VOCAB)
    gen = torch.Generator().manual_seed(0)
    counts = torch.bincount(
        torch.tensor([objective.draw_kind(gen) for _ in range(12_000)]), minlength=4
    )
    freq = dict(zip(UNILM_MASK_KINDS, (counts / counts.sum()).tolist(), strict=True))
    paper = {
        "bidirectional": 1 / 3,
        "seq2seq": 1 / 3,
        "left_to_right": 1 / 6,
        "right_to_left": 1 / 6,
    }
    for kind, p in paper.items():
        assert abs(freq[kind] - p) < 0.015, (kind, freq)
    only = build_objective(UniLMObjective, encoder, VOCAB, proportions={"seq2seq": 2.0})
    batch = only.collate(
        {
            "input_ids": IDS,
            "token_type_ids": TYPES,
            "special_tokens_mask": (IDS < 5).long(),
            "attention_mask": PADDING,
        },
        torch.Generator().manual_seed(1),
    )
    assert torch.equal(batch["attention_mask"], seq2seq_mask(TYPES, PADDING))
    assert UNILM_MASK_KINDS[int(batch["unilm_mask_kind"])] == "seq2seq"
    assert (batch["mlm_labels"] != -100).any()
    with pytest.raises(ValueError, match="valid kinds"):
        build_objective(UniLMObjective, encoder, VOCAB, proportions={"sideways": 1.0})


def test_unilm_examples_are_true_source_target_pairs(encoder) -> None:
    import random

    objective = build_objective(UniLMObjective, encoder, VOCAB)
    documents = [[[10, 11, 12], [13, 14], [15, 16, 17]], [[20, 21], [22, 23, 24]]]
    examples = objective.build_examples(documents, 16, random.Random(0))
    assert examples
    for example in examples:
        assert "next_sentence_label" not in example
        a_doc, b_doc = example["meta_documents"]
        assert a_doc == b_doc
        assert set(example["token_type_ids"]) == {0, 1}


class TestUniLMContract(ObjectiveTestCase):
    objective_cls = UniLMObjective
