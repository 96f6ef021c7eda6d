"""WKLM's loss side: the detection head's BCE by hand, and 5% MLM outside mentions."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from ptm_core.encoders import bert_encoder
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_knowledge.wklm import EntityReplacementObjective, OutsideMentionsMLMObjective


def pytest_approx(value: float) -> object:
    return pytest.approx(value, rel=1e-5, abs=1e-6)


VOCAB = VocabInfo(vocab_size=120, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _encoder():
    return bert_encoder(
        vocab_size=VOCAB.vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_positions=64,
    )


def test_detection_loss_equals_hand_computation() -> None:
    torch.manual_seed(0)
    objective = build_objective(EntityReplacementObjective, _encoder(), VOCAB)
    hidden = torch.randn(2, 7, 16)
    labels = torch.full((2, 7), -100)
    ends = torch.zeros(2, 7, dtype=torch.long)
    # Row 0: mention [1, 3] replaced, [4, 4] original; row 1: [2, 5] replaced; then padding.
    labels[0, 1], ends[0, 1] = 1, 3
    labels[0, 4], ends[0, 4] = 0, 4
    labels[1, 2], ends[1, 2] = 1, 5
    attention = torch.ones(2, 7, dtype=torch.long)
    attention[1, 6] = 0
    labels[1, 6] = 0  # what pad_examples leaves on padding: collate must drop it
    batch = objective.collate(
        {"mention_labels": labels, "mention_ends": ends, "attention_mask": attention},
        torch.Generator(),
    )
    assert batch["mention_labels"][1, 6] == -100
    out = objective(EncoderOutput(last_hidden_state=hidden), batch)
    w = objective.head.classifier.weight[0].detach()
    b = objective.head.classifier.bias[0].detach()
    terms = []
    for row, first, last, y in [(0, 1, 3, 1.0), (0, 4, 4, 0.0), (1, 2, 5, 1.0)]:
        z = float(w @ torch.cat([hidden[row, first], hidden[row, last]]) + b)
        p = 1 / (1 + math.exp(-z))
        terms.append(-(y * math.log(p) + (1 - y) * math.log(1 - p)))
    assert out.loss.item() == pytest_approx(sum(terms) / 3)
    assert out.metrics["mentions"].item() == 3
    assert out.metrics["replaced"].item() == pytest_approx(2 / 3)
    # "outside" reads the pieces around each mention.
    outside = build_objective(EntityReplacementObjective, _encoder(), VOCAB, boundary="outside")
    outside.head.load_state_dict(objective.head.state_dict())
    shifted = hidden.clone()
    shifted[0, [0, 4, 3, 5]] = hidden[0, [1, 3, 4, 4]]
    shifted[1, [1, 6]] = hidden[1, [2, 5]]
    again = outside(EncoderOutput(last_hidden_state=shifted), batch)
    assert again.loss.item() == pytest_approx(out.loss.item())
    out.loss.backward()
    assert objective.head.classifier.weight.grad is not None


def test_detection_accuracy_counts_the_sign_of_the_logit() -> None:
    objective = build_objective(EntityReplacementObjective, _encoder(), VOCAB)
    with torch.no_grad():
        objective.head.classifier.weight.zero_()
        objective.head.classifier.weight[0, 0] = 1.0
        objective.head.classifier.bias.zero_()
    hidden = torch.zeros(1, 5, 16)
    hidden[0, 1, 0], hidden[0, 3, 0] = 2.0, -2.0  # logits +2 and -2
    labels = torch.tensor([[-100, 1, -100, 1, -100]])
    ends = torch.tensor([[0, 1, 0, 3, 0]])
    out = objective(
        EncoderOutput(last_hidden_state=hidden), {"mention_labels": labels, "mention_ends": ends}
    )
    assert out.metrics["accuracy"].item() == 0.5
    expected = (F.softplus(torch.tensor(-2.0)) + F.softplus(torch.tensor(2.0))) / 2
    assert out.loss.item() == pytest_approx(expected.item())


def test_mlm_masks_five_percent_outside_mentions_only() -> None:
    objective = build_objective(OutsideMentionsMLMObjective, _encoder(), VOCAB)
    assert objective.mask_prob == 0.05
    g = torch.Generator().manual_seed(0)
    rows, length = 400, 200
    ids = torch.randint(5, VOCAB.vocab_size, (rows, length), generator=g)
    special = torch.zeros(rows, length, dtype=torch.long)
    special[:, 0] = special[:, -1] = 1
    special[:, -20:] = 1  # padding
    mentions = (torch.rand(rows, length, generator=g) < 0.3).long()
    batch = objective.collate(
        {"input_ids": ids, "special_tokens_mask": special, "mention_mask": mentions}, g
    )
    chosen = batch["mlm_labels"] != -100
    candidates = (special == 0) & (mentions == 0)
    assert not (chosen & ~candidates).any()
    assert (batch["mlm_labels"][chosen] == ids[chosen]).all()
    n = int(candidates.sum())
    rate = chosen.sum().item() / n
    # Per-row counts are floor(0.05 n_row + u): the rate is 0.05 up to sampling noise.
    assert abs(rate - 0.05) < 4 * math.sqrt(0.05 * 0.95 / n), rate
    # Without the exclusion, mention pieces are chosen too.
    plain = build_objective(OutsideMentionsMLMObjective, _encoder(), VOCAB, exclude_mentions=False)
    again = plain.collate(
        {"input_ids": ids, "special_tokens_mask": special, "mention_mask": mentions}, g
    )
    assert ((again["mlm_labels"] != -100) & (mentions == 1)).any()


def test_a_batch_without_mentions_gives_zero_loss_and_no_accuracy() -> None:
    objective = build_objective(EntityReplacementObjective, _encoder(), VOCAB)
    labels = torch.full((2, 4), -100)
    out = objective(
        EncoderOutput(last_hidden_state=torch.randn(2, 4, 16)),
        {"mention_labels": labels, "mention_ends": torch.zeros(2, 4, dtype=torch.long)},
    )
    assert out.loss.item() == 0.0 and out.loss.requires_grad
    assert "accuracy" not in out.metrics and out.metrics["mentions"].item() == 0
