"""SpanBERT span masking: Geometric(0.2) span lengths <= 10 words, 15% coverage, per-span 80/10/10."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest
import torch
from cases import ObjectiveTestCase
from test_whole_word import CONTINUATION, SAMPLE_VOCAB, VOCAB, synthetic_words

from ptm_core import bert_encoder
from ptm_core.objectives import IGNORE_INDEX, SpanMaskingObjective, WordBoundaries, span_mask_tokens
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.span import span_length_distribution
from ptm_core.tokenization import WordPieceTokenizer

BOUNDARIES = WordBoundaries(CONTINUATION)


def _spans(labels_row: torch.Tensor) -> list[tuple[int, int]]:
    """Maximal runs of masked positions as (first, last) pairs."""
    runs: list[tuple[int, int]] = []
    for pos in (labels_row != IGNORE_INDEX).nonzero().squeeze(1).tolist():
        if runs and runs[-1][1] == pos - 1:
            runs[-1] = (runs[-1][0], pos)
        else:
            runs.append((pos, pos))
    return runs


def test_the_length_distribution_is_a_truncated_geometric_with_mean_3_8() -> None:
    probs = span_length_distribution(0.2, 10)
    assert len(probs) == 10 and abs(sum(probs) - 1) < 1e-12
    assert all(a / b == pytest.approx(1 / 0.8) for a, b in itertools.pairwise(probs))
    assert sum((n + 1) * p for n, p in enumerate(probs)) == pytest.approx(3.797, abs=1e-3)


def test_span_lengths_and_coverage_over_20k_spans() -> None:
    ids, special = synthetic_words(rows=8000, length=128, continuation_rate=0.2)
    ids[:, 40], special[:, 40] = VOCAB.sep_id, True  # a pair's middle [SEP]: never crossed
    out = span_mask_tokens(ids, special, BOUNDARIES, VOCAB, torch.Generator().manual_seed(0))
    lengths = torch.tensor(out.span_words, dtype=torch.float)
    assert len(lengths) >= 20_000
    assert abs(lengths.mean().item() - 3.8) <= 0.15, lengths.mean()
    assert lengths.max().item() == 10 and lengths.min().item() == 1
    selected = out.labels != IGNORE_INDEX
    coverage = selected.sum().item() / (~special).sum().item()
    assert abs(coverage - 0.15) <= 0.01, coverage
    assert not (selected & special).any()
    assert (out.span_right[selected] <= 40).logical_or(out.span_left[selected] >= 40).all()
    assert sum(out.span_pieces) == selected.sum().item()  # spans never overlap


def test_spans_are_whole_words_with_one_treatment_each_and_correct_boundaries() -> None:
    ids, special = synthetic_words(rows=500, length=128)
    out = span_mask_tokens(ids, special, BOUNDARIES, VOCAB, torch.Generator().manual_seed(1))
    selected = out.labels != IGNORE_INDEX
    words = BOUNDARIES.word_index(ids, ~special)
    treatments = {"mask": 0, "random": 0, "kept": 0}
    for row in range(ids.shape[0]):
        # A masked piece's span is [left + 1, right - 1], all masked, a run of whole words.
        for pos in selected[row].nonzero().squeeze(1).tolist():
            first = int(out.span_left[row, pos]) + 1
            last = int(out.span_right[row, pos]) - 1
            assert selected[row, first : last + 1].all()
            assert int(out.span_position[row, pos]) == pos - first
            if words[row, first] >= 0 and first > 0:
                assert words[row, first - 1] != words[row, first]  # starts a word
            if last + 1 < ids.shape[1] and words[row, last + 1] >= 0:
                assert words[row, last + 1] != words[row, last]  # ends a word
        for first, last in _spans(out.labels[row]):
            left = int(out.span_left[row, first])
            # Adjacent spans merge into one run; split the run at the recorded boundaries.
            pos = first
            while pos <= last:
                end = int(out.span_right[row, pos]) - 1
                piece = slice(int(out.span_left[row, pos]) + 1, end + 1)
                new, old = out.input_ids[row, piece], ids[row, piece]
                if (new == VOCAB.mask_id).all():
                    treatments["mask"] += 1
                elif torch.equal(new, old):
                    treatments["kept"] += 1
                else:
                    assert not (new == VOCAB.mask_id).any()  # never a mix of treatments
                    treatments["random"] += 1
                pos = end + 1
            assert left + 1 == first
    total = sum(treatments.values())
    assert total > 1000
    assert abs(treatments["mask"] / total - 0.8) < 0.04
    assert abs(treatments["kept"] / total - 0.1) < 0.03


def test_objective_static_and_dynamic_modes_write_span_keys() -> None:
    from test_whole_word import SAMPLE_VOCAB

    from ptm_core.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    vocab = tokenizer.vocab_info
    encoder = bert_encoder(vocab_size=vocab.vocab_size, hidden_size=16, num_layers=1, num_heads=2)
    encoded = tokenizer.encode("Marie Curie studied radioactivity in Paris and in Warsaw.")
    example = {
        "input_ids": encoded.input_ids,
        "token_type_ids": encoded.token_type_ids,
        "special_tokens_mask": encoded.special_tokens_mask,
    }
    static = build_objective(
        SpanMaskingObjective, encoder, vocab, tokenizer=tokenizer, mode="static"
    )
    prepared = static.prepare_example(example, torch.Generator().manual_seed(0))
    assert {"mlm_labels", "span_left", "span_right", "span_position"} <= set(prepared)
    assert any(label != IGNORE_INDEX for label in prepared["mlm_labels"])
    dynamic = build_objective(SpanMaskingObjective, encoder, vocab, tokenizer=tokenizer)
    assert dynamic.prepare_example(example, torch.Generator()) is example
    batch = dynamic.collate(
        {k: torch.tensor([v] * 4) for k, v in example.items()}, torch.Generator().manual_seed(0)
    )
    assert batch["span_left"].shape == batch["input_ids"].shape


def test_invalid_span_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="geometric"):
        span_length_distribution(0.0, 10)
    with pytest.raises(ValueError, match="max_length"):
        span_length_distribution(0.2, 0)


class TestSpanMaskingContract(ObjectiveTestCase):
    objective_cls = SpanMaskingObjective
    vocab = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB).vocab_info
    kwargs = MappingProxyType({"tokenizer": SAMPLE_VOCAB})
