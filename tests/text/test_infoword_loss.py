"""InfoWord's loss side: InfoNCE equals hand-computed values, is log(B) at a uniform score,
takes its negatives from the other rows of the batch, and passes the objective contract."""

from __future__ import annotations

import math

import pytest
import torch
from cases import VOCAB, ObjectiveTestCase, token_batch

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_text.infoword import InfoWordObjective, InfoWordScoreHead, info_nce, same_ngram


def test_info_nce_equals_a_hand_computed_value() -> None:
    scores = torch.tensor([[2.0, 0.0], [1.0, 3.0]])
    # Row 0: -log(e^2 / (e^2 + e^0)); row 1: -log(e^3 / (e^1 + e^3)).
    expected = 0.5 * (math.log1p(math.exp(-2.0)) + math.log1p(math.exp(-2.0)))
    assert math.isclose(float(info_nce(scores)), expected, rel_tol=1e-6)
    scores = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.5, 0.5], [1.0, 0.0, -1.0]])
    by_hand = [
        -0.0 + math.log(1 + math.e + math.e**2),
        math.log(3.0),
        1.0 + math.log(math.e**1 + 1 + math.e**-1),
    ]
    assert math.isclose(float(info_nce(scores)), sum(by_hand) / 3, rel_tol=1e-6)


@pytest.mark.parametrize("rows", [2, 5, 16])
def test_info_nce_is_log_b_at_a_uniform_score(rows: int) -> None:
    assert math.isclose(
        float(info_nce(torch.full((rows, rows), 0.7))), math.log(rows), rel_tol=1e-6
    )


def test_excluded_pairs_leave_the_denominator() -> None:
    scores = torch.zeros(3, 3)
    excluded = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
    # Rows 0 and 1 see 2 candidates each, row 2 sees 3.
    expected = (2 * math.log(2) + math.log(3)) / 3
    assert math.isclose(float(info_nce(scores, excluded)), expected, rel_tol=1e-6)


def test_same_ngram_marks_identical_sequences_of_other_rows_only() -> None:
    ids = torch.tensor([[2, 9, 3, 0], [2, 9, 3, 0], [2, 9, 8, 3]])
    assert same_ngram(ids).tolist() == [
        [False, True, False],
        [True, False, False],
        [False, False, False],
    ]


def test_head_scores_every_sentence_against_every_ngram() -> None:
    head = InfoWordScoreHead(hidden_size=6, projection_size=4)
    sentences, ngrams = torch.randn(3, 6), torch.randn(5, 6)
    scores = head(sentences, ngrams)
    assert scores.shape == (3, 5)
    expected = head.global_projection(sentences[1]) @ head.local_projection(ngrams[4])
    assert torch.allclose(scores[1, 4], expected, atol=1e-6)


def _encoder() -> torch.nn.Module:
    from ptm_core import bert_encoder

    return bert_encoder(
        vocab_size=120,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
        attention_dropout=0.0,
    )


def test_negatives_are_the_other_rows_ngrams() -> None:
    """Each sentence's loss term depends on every other row's n-gram (its negatives) and on
    nothing else: changing row 2's n-gram changes rows 0, 1 and 3's terms."""
    torch.manual_seed(0)
    encoder = _encoder().eval()
    objective = build_objective(InfoWordObjective, encoder, VOCAB)
    batch = objective.collate(token_batch(VOCAB, rows=4), torch.Generator().manual_seed(0))
    hidden = encoder(batch["input_ids"], attention_mask=batch["attention_mask"])
    local = encoder(
        batch["infoword_ngram_ids"], attention_mask=batch["infoword_ngram_mask"]
    ).last_hidden_state[:, 0]
    scores = objective.head(hidden.last_hidden_state[:, 0], local)
    per_row = -torch.log_softmax(scores, dim=1).diagonal()
    loss = objective(EncoderOutput(last_hidden_state=hidden.last_hidden_state), batch).loss
    assert torch.allclose(loss, per_row.mean(), atol=1e-5)
    # The gradient of row 0's term reaches row 2's local view: it is a negative of row 0.
    local = local.detach().requires_grad_(True)
    row0 = -torch.log_softmax(objective.head(hidden.last_hidden_state[:1, 0], local), dim=1)[0, 0]
    row0.backward()
    assert local.grad is not None
    assert all(float(local.grad[k].abs().sum()) > 0 for k in range(4))


def test_loss_needs_the_data_side_keys() -> None:
    objective = build_objective(InfoWordObjective, _encoder(), VOCAB)
    out = EncoderOutput(last_hidden_state=torch.zeros(2, 4, 32))
    with pytest.raises(KeyError, match="infoword_ngram_ids"):
        objective(out, {"input_ids": torch.zeros(2, 4, dtype=torch.long)})


def test_mix_with_mlm_trains_both_and_keeps_one_copy_of_the_encoder() -> None:
    torch.manual_seed(0)
    encoder = _encoder()
    vocab = VOCAB
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, vocab),
            "infoword": build_objective(InfoWordObjective, encoder, vocab),
        }
    )
    model = PretrainingModel(encoder, mix)
    assert not any(
        k.startswith("objectives.objectives.infoword.encoder") for k in model.state_dict()
    )
    batch = mix.collate(token_batch(vocab, rows=6), torch.Generator().manual_seed(1))
    out = model(batch)
    assert {"mlm/loss", "infoword/loss", "infoword/accuracy", "infoword/mi_bound"} <= set(
        out.metrics
    )
    assert math.isfinite(out.loss.item())


def test_infoword_listed_before_mlm_is_refused_with_the_fix() -> None:
    encoder = _encoder()
    mix = ObjectiveMix(
        {
            "infoword": build_objective(InfoWordObjective, encoder, VOCAB),
            "mlm": build_objective(MaskedLMObjective, encoder, VOCAB, mask_prob=0.5),
        }
    )
    batch = mix.collate(token_batch(VOCAB, rows=6), torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match="list the mlm objective before infoword"):
        PretrainingModel(encoder, mix)(batch)


class TestInfoWordContract(ObjectiveTestCase):
    objective_cls = InfoWordObjective
