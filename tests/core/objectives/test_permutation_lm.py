"""XLNet permutation LM: order sampling, partial prediction, masks, the objective."""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core.encoders import bert_encoder, xlnet_encoder
from ptm_core.objectives import (
    IGNORE_INDEX,
    PermutationLMObjective,
    num_predictions,
    permutation_batch,
    sample_order,
    span_partition,
)
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=60, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _rows(lengths: list[int], width: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """A padded batch: [CLS] tokens [SEP] per row, padding after."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    special = torch.ones(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        ids[row, : n + 2] = torch.cat(
            [torch.tensor([2]), torch.randint(5, 60, (n,), generator=gen), torch.tensor([3])]
        )
        special[row, 1 : n + 1] = 0
    padding = ids != 0
    return ids, special, padding


def test_uniform_orders_put_every_position_first_equally_often() -> None:
    gen = torch.Generator().manual_seed(0)
    count, draws = 6, 12_000
    firsts = torch.bincount(
        torch.stack([sample_order(count, gen)[0] for _ in range(draws)]), minlength=count
    )
    assert ((firsts.float() / draws - 1 / count).abs() < 0.015).all(), firsts


def test_span_partition_mean_length_is_uniform_mean() -> None:
    gen = torch.Generator().manual_seed(1)
    lengths = [n for _ in range(40) for n in span_partition(2_000, gen, max_span=5)]
    assert len(lengths) >= 20_000
    assert abs(sum(lengths) / len(lengths) - 3.0) < 0.1
    assert max(lengths) == 5 and min(lengths) == 1


def test_span_based_orders_keep_spans_together() -> None:
    gen = torch.Generator().manual_seed(2)
    adjacent_span, adjacent_uniform = 0, 0
    for _ in range(200):
        spans = sample_order(60, gen, span_based=True)
        uniform = sample_order(60, gen)
        assert sorted(spans.tolist()) == list(range(60))  # a permutation
        adjacent_span += int((spans[1:] == spans[:-1] + 1).sum())
        adjacent_uniform += int((uniform[1:] == uniform[:-1] + 1).sum())
    # Mean span 3: about 2/3 of neighbours in the order are neighbours in the text.
    assert adjacent_span / (200 * 59) > 0.6
    assert adjacent_uniform / (200 * 59) < 0.05


def test_partial_prediction_targets_the_last_sixth_of_each_order() -> None:
    ids, special, padding = _rows([30, 12, 5, 1], 32)
    out = permutation_batch(ids, special, padding, torch.Generator().manual_seed(0))
    ranks = out["order_ranks"]
    for row, n in enumerate([30, 12, 5, 1]):
        labels = out["plm_labels"][row]
        predicted = out["query_positions"][row][labels != IGNORE_INDEX]
        assert len(predicted) == num_predictions(n, 6.0) == max(1, round(n / 6))
        # The targets are the highest ranks of the row's order.
        real_ranks = ranks[row][padding[row] & (special[row] == 0)]
        assert (
            sorted(ranks[row, predicted].tolist()) == sorted(real_ranks.tolist())[-len(predicted) :]
        )
        assert not special[row, predicted].any()
        assert torch.equal(labels[labels != IGNORE_INDEX], ids[row, predicted])


def test_prediction_rate_is_one_over_k() -> None:
    gen = torch.Generator().manual_seed(3)
    predicted = candidates = 0
    for seed in range(30):
        ids, special, padding = _rows([126] * 8, 128, seed=seed)
        out = permutation_batch(ids, special, padding, gen, partial_k=6.0)
        predicted += int((out["plm_labels"] != IGNORE_INDEX).sum())
        candidates += int((padding & (special == 0)).sum())
    assert abs(predicted / candidates - 1 / 6) < 0.005


def test_masks_follow_the_ranks_and_specials_are_context_for_all() -> None:
    ids, special, padding = _rows([9, 4], 11)
    out = permutation_batch(ids, special, padding, torch.Generator().manual_seed(4))
    ranks, content = out["order_ranks"], out["attention_mask"]
    for row in range(2):
        real = padding[row]
        for i in real.nonzero().squeeze(1).tolist():
            expected = (ranks[row] <= ranks[row, i]) & real
            assert torch.equal(content[row, i], expected)
        # [CLS] (rank -1) is seen by every real token.
        assert content[row, real, 0].all()
    rows = out["query_attention_mask"]
    for row in range(2):
        for slot, position in enumerate(out["query_positions"][row].tolist()):
            if out["plm_labels"][row, slot] == IGNORE_INDEX:
                continue
            assert not rows[row, slot, position]  # never its own content
            assert torch.equal(rows[row, slot], (ranks[row] < ranks[row, position]) & padding[row])


def test_bidirectional_context_lets_the_context_see_itself_but_not_the_targets() -> None:
    ids, special, padding = _rows([24], 26)
    out = permutation_batch(
        ids, special, padding, torch.Generator().manual_seed(5), bidirectional_context=True
    )
    targets = out["query_positions"][0]
    context = padding[0] & (special[0] == 0)
    context[targets] = False
    content = out["attention_mask"][0]
    assert content[context][:, context].all()
    assert not content[context][:, targets].any()


def _objective(**kwargs: object) -> tuple[PermutationLMObjective, torch.nn.Module]:
    encoder = xlnet_encoder(
        vocab_size=60, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64
    )
    return build_objective(PermutationLMObjective, encoder, VOCAB, **kwargs), encoder  # type: ignore[arg-type]


def test_objective_loss_is_finite_and_trains_the_encoder() -> None:
    from ptm_core.models import PretrainingModel
    from ptm_core.objectives import ObjectiveMix

    objective, encoder = _objective(span_based=True)
    ids, special, padding = _rows([20, 14], 22)
    batch = {"input_ids": ids, "attention_mask": padding.long(), "special_tokens_mask": special}
    batch = objective.collate(batch, torch.Generator().manual_seed(0))
    model = PretrainingModel(encoder, ObjectiveMix({"plm": objective}))  # type: ignore[arg-type]
    out = model(batch)
    assert torch.isfinite(out.loss)
    assert out.metrics["plm/predictions"] == 3 + 2
    out.loss.backward()
    assert encoder.query_embedding is not None and encoder.query_embedding.grad is not None
    assert objective.output_bias.grad is not None


def test_a_targets_own_token_never_reaches_its_prediction() -> None:
    objective, encoder = _objective()
    encoder.eval()
    ids, special, padding = _rows([23], 25)
    batch = objective.collate(
        {"input_ids": ids, "attention_mask": padding.long(), "special_tokens_mask": special},
        torch.Generator().manual_seed(6),
    )
    inputs = {
        k: batch[k]
        for k in ("input_ids", "attention_mask", "query_positions", "query_attention_mask")
    }
    last = batch["query_positions"][0][
        batch["order_ranks"][0, batch["query_positions"][0]].argmax()
    ]
    with torch.no_grad():
        before = encoder(**inputs).query_hidden_state
        changed = dict(inputs, input_ids=ids.clone())
        changed["input_ids"][0, last] = (ids[0, last] + 9) % 55 + 5
        after = encoder(**changed).query_hidden_state
    assert before is not None and after is not None
    # The last target of the order is seen by no query, its own included.
    assert (before - after).abs().max() <= 1e-6


def test_objective_refuses_an_absolute_position_encoder() -> None:
    encoder = bert_encoder(vocab_size=60, hidden_size=32, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="position_encoding='relative'"):
        build_objective(PermutationLMObjective, encoder, VOCAB)
    with pytest.raises(ValueError, match="partial_k"):
        _objective(partial_k=0.5)


def test_recurrence_in_pretraining_feeds_the_previous_segment_as_memory() -> None:
    from ptm_core.models import PretrainingModel
    from ptm_core.objectives import ObjectiveMix

    encoder = xlnet_encoder(
        vocab_size=60,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        memory_length=8,
    )
    objective = build_objective(PermutationLMObjective, encoder, VOCAB, memory_segment=10)
    model = PretrainingModel(encoder, ObjectiveMix({"plm": objective})).eval()
    ids, special, padding = _rows([22, 14], 24)
    raw = {"input_ids": ids, "attention_mask": padding.long(), "special_tokens_mask": special}
    batch = objective.collate(raw, torch.Generator().manual_seed(0))
    assert batch["input_ids"].shape == (2, 14) and batch["memory_input_ids"].shape == (2, 10)
    assert batch["memory_mask"].shape == (2, 8)  # the memory keeps its last 8 positions
    assert torch.equal(batch["input_ids"], ids[:, 10:])
    # The second row's current segment holds 6 real tokens ([SEP] included): 5 candidates.
    assert int((batch["special_tokens_mask"][1] == 0).sum()) == 5
    assert int((batch["plm_labels"][1] != IGNORE_INDEX).sum()) == num_predictions(5, 6.0)
    with torch.no_grad():
        loss = model(batch).loss
        changed = dict(batch, memory_input_ids=batch["memory_input_ids"].clone())
        changed["memory_input_ids"][:, 5] = (batch["memory_input_ids"][:, 5] + 7) % 55 + 5
        assert (model(changed).loss - loss).abs() > 1e-6  # the memory is used
    model.train()
    model(batch).loss.backward()  # and the memory pass keeps no graph
    assert encoder.query_embedding is not None and encoder.query_embedding.grad is not None


def test_recurrence_needs_an_encoder_with_memory() -> None:
    encoder = xlnet_encoder(vocab_size=60, hidden_size=32, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match=r"model\.memory_length"):
        build_objective(PermutationLMObjective, encoder, VOCAB, memory_segment=8)


def test_short_batches_split_at_half_their_length() -> None:
    encoder = xlnet_encoder(
        vocab_size=60,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        memory_length=32,
    )
    objective = build_objective(PermutationLMObjective, encoder, VOCAB, memory_segment=32)
    ids, special, padding = _rows([19, 7], 21)  # the batch is padded to 21 tokens only
    raw = {"input_ids": ids, "attention_mask": padding.long(), "special_tokens_mask": special}
    batch = objective.collate(raw, torch.Generator().manual_seed(0))
    assert batch["memory_input_ids"].shape == (2, 10) and batch["input_ids"].shape == (2, 11)
    assert batch["memory_mask"].shape == (2, 10)
    assert (batch["plm_labels"][0] != IGNORE_INDEX).any()


class TestPermutationLMContract(ObjectiveTestCase):
    objective_cls = PermutationLMObjective
    vocab = VOCAB
    kwargs = MappingProxyType({"span_based": True})

    def make_encoder(self) -> torch.nn.Module:
        return xlnet_encoder(
            vocab_size=60, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64
        )

    def make_input(self) -> dict[str, torch.Tensor]:
        ids, special, padding = _rows([20, 14], 22)
        return {"input_ids": ids, "attention_mask": padding.long(), "special_tokens_mask": special}
