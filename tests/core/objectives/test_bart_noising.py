"""BART noising: published rates and bijections (Lewis et al., 2020)."""

from __future__ import annotations

from types import MappingProxyType

import torch
from cases import Seq2SeqObjectiveTestCase

from ptm_core.objectives.bart_noising import (
    BartDenoisingObjective,
    document_rotation,
    poisson_span_lengths,
    sentence_permutation,
    text_infilling,
    token_deletion,
    token_masking,
)
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=500, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
MASK = VOCAB.mask_id


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_poisson_span_lengths_have_mean_lambda() -> None:
    g = _gen()
    lengths: list[int] = []
    while len(lengths) < 20_000:
        # Drop each call's last (shortened) span: it is truncated, not Poisson.
        lengths.extend(poisson_span_lengths(300, g, 3.0)[:-1])
    mean = sum(lengths) / len(lengths)
    assert abs(mean - 3.0) < 0.1, mean
    assert 0 in lengths  # zero-length spans exist (inserted masks)


def test_text_infilling_masks_the_configured_ratio_with_one_mask_per_span() -> None:
    g = _gen(1)
    for n in (10, 57, 200):
        ids = list(range(10, 10 + n))
        noised, spans = text_infilling(ids, 0.3, MASK, g)
        masked = sum(length for _, length in spans)
        assert masked == round(0.3 * n)
        assert noised.count(MASK) == len(spans)  # one mask per span, 0-length spans too
        kept = [t for t in noised if t != MASK]
        assert len(kept) == n - masked
        assert kept == sorted(kept)  # order of kept tokens is preserved
        hidden = {t for start, length in spans for t in ids[start : start + length]}
        assert set(kept).isdisjoint(hidden)


def test_zero_length_span_inserts_a_mask() -> None:
    g = _gen(2)
    ids = list(range(10, 110))
    seen_insert = False
    for _ in range(50):
        noised, spans = text_infilling(ids, 0.3, MASK, g)
        seen_insert |= any(length == 0 for _, length in spans)
        assert len(noised) == 100 - sum(n for _, n in spans) + len(spans)
    assert seen_insert


def test_masking_and_deletion_rates() -> None:
    ids = list(range(10, 110))
    masked = token_masking(ids, 0.15, MASK, _gen())
    assert masked.count(MASK) == 15
    deleted = token_deletion(ids, 0.2, _gen())
    assert len(deleted) == 80 and deleted == sorted(deleted)


def test_permutation_and_rotation_are_bijections() -> None:
    sentences = [[10, 11, 12], [20, 21], [30, 31, 32, 33], [40]]
    flat = [t for s in sentences for t in s]
    g = _gen(3)
    orders = set()
    for _ in range(30):
        permuted = sentence_permutation(sentences, g)
        assert sorted(permuted) == sorted(flat)
        rotated = document_rotation(flat, g)
        assert sorted(rotated) == sorted(flat)
        start = rotated.index(flat[0])
        assert rotated[start:] + rotated[:start] == flat  # a rotation, not a shuffle
        orders.add(tuple(permuted))
    assert len(orders) > 5


def test_objective_target_is_the_original_document() -> None:
    objective = BartDenoisingObjective(
        VOCAB, token_mask_ratio=0.1, deletion_ratio=0.1, rotate=True, max_length=64
    )
    source = [[10, 11, 12, 13], [20, 21, 22], [30, 31, 32, 33, 34]]
    example = objective.make_example(source, _gen())
    original = [t for s in source for t in s]
    assert example["labels"] == [*original, VOCAB.sep_id]
    assert example["decoder_input_ids"] == [VOCAB.cls_id, *original]
    assert example["input_ids"][0] == VOCAB.cls_id and example["input_ids"][-1] == VOCAB.sep_id
    assert example["input_ids"] != [VOCAB.cls_id, *original, VOCAB.sep_id]
    batch = objective.collate([source, source[:1]], _gen())
    assert batch["labels"][1, 5:].eq(-100).all()
    assert batch["decoder_attention_mask"].sum().item() == len(original) + 1 + 5


def test_long_document_is_truncated_identically_in_input_and_target() -> None:
    objective = BartDenoisingObjective(VOCAB, infilling_ratio=0.0, max_length=12)
    source = [list(range(10, 16)), list(range(20, 26)), list(range(30, 36))]
    example = objective.make_example(source, _gen(4))
    assert len(example["labels"]) == 11
    assert sorted(example["input_ids"][1:-1]) == sorted(example["labels"][:-1])


class TestBartDenoisingContract(Seq2SeqObjectiveTestCase):
    objective_cls = BartDenoisingObjective
    vocab = VOCAB
    kwargs = MappingProxyType({"max_length": 32})
