"""Masked LM: published rates (15%, 80/10/10), specials never chosen, static vs dynamic."""

from __future__ import annotations

from types import MappingProxyType

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core import bert_encoder
from ptm_core.data import PretrainingBatches
from ptm_core.objectives import (
    IGNORE_INDEX,
    MaskedLMObjective,
    ObjectiveMix,
    mask_tokens,
    select_positions,
)
from ptm_core.objectives.inputs import build_objective
from ptm_core.seeding import generator_for
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=1000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _corpus_batch(rows: int = 600, length: int = 300) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(5, VOCAB.vocab_size, (rows, length), generator=gen)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=gen)
    pad = torch.arange(length)[None, :] >= lengths[:, None]
    ids[:, 0] = VOCAB.cls_id
    ids[torch.arange(rows), lengths - 1] = VOCAB.sep_id
    ids[:, length // 3] = VOCAB.sep_id
    ids[pad] = VOCAB.pad_id
    special = (ids == VOCAB.cls_id) | (ids == VOCAB.sep_id) | pad
    return ids, special


def test_selection_rate_and_80_10_10_over_100k_tokens() -> None:
    ids, special = _corpus_batch()
    corrupted, labels = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(0))
    candidates = ~special
    assert int(candidates.sum()) >= 100_000
    selected = labels != IGNORE_INDEX
    rate = selected.sum().item() / candidates.sum().item()
    assert abs(rate - 0.15) <= 0.005, rate

    n = selected.sum().item()
    masked = (corrupted == VOCAB.mask_id) & selected
    kept = (corrupted == ids) & selected
    random = selected & ~masked & ~kept
    assert abs(masked.sum().item() / n - 0.8) <= 0.015
    assert abs(random.sum().item() / n - 0.1) <= 0.015
    assert abs(kept.sum().item() / n - 0.1) <= 0.015
    # Random replacements are regular tokens, never specials.
    assert not torch.isin(corrupted[random], torch.tensor(VOCAB.special_ids)).any()
    # Labels hold the original token exactly where selected.
    assert torch.equal(labels[selected], ids[selected])
    # Nothing outside the selection changes.
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_special_tokens_and_padding_are_never_selected() -> None:
    ids, special = _corpus_batch(rows=200)
    for seed in range(5):
        corrupted, labels = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(seed))
        assert (labels[special] == IGNORE_INDEX).all()
        assert torch.equal(corrupted[special], ids[special])


def test_per_row_count_is_unbiased_and_at_least_one() -> None:
    candidates = torch.zeros(20000, 20, dtype=torch.bool)
    candidates[:, :7] = True  # 7 * 0.15 = 1.05 tokens per row on average
    chosen = select_positions(candidates, 0.15, torch.Generator().manual_seed(1))
    counts = chosen.sum(dim=1).float()
    assert not (chosen & ~candidates).any()
    assert counts.min() >= 1
    assert abs(counts.mean().item() - 1.05) < 0.02


def test_same_generator_seed_gives_same_masks() -> None:
    ids, special = _corpus_batch(rows=10)
    a = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(3))
    b = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(3))
    c = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(4))
    assert torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])


def _epochs(mode: str) -> tuple[torch.Tensor, torch.Tensor]:
    encoder = bert_encoder(vocab_size=1000, hidden_size=16, num_layers=1, num_heads=2)
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, VOCAB, mode=mode)})  # type: ignore[arg-type]
    ids, special = _corpus_batch(rows=4, length=64)
    examples = [
        {"input_ids": i.tolist(), "special_tokens_mask": s.long().tolist()}
        for i, s in zip(ids, special, strict=True)
    ]
    generator = generator_for(0, "static")
    examples = [mix.prepare_example(e, generator) for e in examples]
    source = PretrainingBatches(examples, 4, pad_id=0, transform=mix.collate, shuffle=False)
    first = next(source.iter_batches(0))["mlm_labels"]
    second = next(source.iter_batches(1))["mlm_labels"]
    return first, second


def test_dynamic_masks_differ_between_epochs_static_masks_do_not() -> None:
    first, second = _epochs("dynamic")
    assert not torch.equal(first, second)
    first, second = _epochs("static")
    assert torch.equal(first, second)
    assert (first != IGNORE_INDEX).any()


def test_masked_only_head_gives_the_full_head_loss_and_gradients() -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=1000, hidden_size=32, num_layers=1, num_heads=2).eval()
    ids, special = _corpus_batch(rows=3, length=40)
    _, labels = mask_tokens(ids, special, VOCAB, torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "mlm_labels": labels}
    results = []
    for masked_only in (True, False):
        objective = build_objective(MaskedLMObjective, encoder, VOCAB, masked_only=masked_only)
        torch.manual_seed(1)
        objective.head.dense.reset_parameters()
        encoder.zero_grad()
        out = objective(encoder(ids), batch)
        out.loss.backward()
        results.append((out.loss.detach(), encoder.word_embeddings.weight.grad.clone()))
    assert torch.allclose(results[0][0], results[1][0], atol=1e-6)
    assert torch.allclose(results[0][1], results[1][1], atol=1e-6)


def test_head_is_tied_to_the_token_embeddings() -> None:
    encoder = bert_encoder(vocab_size=1000, hidden_size=16, num_layers=1, num_heads=2)
    objective = build_objective(MaskedLMObjective, encoder, VOCAB)
    assert objective.head.decoder.weight is encoder.word_embeddings.weight


def test_bad_settings_are_clear_errors() -> None:
    encoder = bert_encoder(vocab_size=999, hidden_size=16, num_layers=1, num_heads=2)
    with pytest.raises(
        ValueError, match="tokenizer has 1000 ids but the encoder's vocab_size is 999"
    ):
        build_objective(MaskedLMObjective, encoder, VOCAB)
    encoder = bert_encoder(vocab_size=1000, hidden_size=16, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="mask_prob"):
        build_objective(MaskedLMObjective, encoder, VOCAB, mask_prob=0.0)
    with pytest.raises(ValueError, match="sum to at most 1"):
        build_objective(
            MaskedLMObjective, encoder, VOCAB, mask_token_prob=0.8, random_token_prob=0.3
        )
    with pytest.raises(ValueError, match="'dynamic' or 'static'"):
        build_objective(MaskedLMObjective, encoder, VOCAB, mode="sometimes")  # type: ignore[arg-type]


class TestMaskedLMContract(ObjectiveTestCase):
    objective_cls = MaskedLMObjective


class TestStaticMaskedLMContract(ObjectiveTestCase):
    objective_cls = MaskedLMObjective
    kwargs = MappingProxyType({"mode": "static"})
