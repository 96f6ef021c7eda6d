"""InfoWord's span choice: n-gram lengths, start positions and the masked share follow the
published rule (one contiguous n-gram per sentence, n uniform in 1..5), with fixed seeds."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.tokenization import VocabInfo
from ptm_text.infoword import InfoWordObjective, choose_ngrams, ngram_length_distribution

VOCAB = VocabInfo(vocab_size=200, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _rows(rows: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``[CLS] w.. [SEP]`` rows of distinct regular ids, and their free (non-special) mask."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, VOCAB.vocab_size, (rows, length), generator=gen)
    ids[:, 0], ids[:, -1] = VOCAB.cls_id, VOCAB.sep_id
    free = torch.ones(rows, length, dtype=torch.bool)
    free[:, 0] = free[:, -1] = False
    return ids, free


def test_length_distribution_uniform_and_clipped_geometric() -> None:
    assert ngram_length_distribution(5) == [0.2] * 5
    geo = ngram_length_distribution(10, 0.2)
    assert math.isclose(sum(geo), 1.0)
    assert math.isclose(
        sum((n + 1) * p for n, p in enumerate(geo)), 3.80, abs_tol=0.01
    )  # SpanBERT's ~3.8
    with pytest.raises(ValueError, match="max_ngram"):
        ngram_length_distribution(0)
    with pytest.raises(ValueError, match="geometric_p"):
        ngram_length_distribution(5, 1.5)


def test_ngram_lengths_are_uniform_in_1_to_5_chi_square() -> None:
    ids, free = _rows(4000, 40)
    choice = choose_ngrams(ids, free, VOCAB, torch.Generator().manual_seed(1))
    counts = torch.bincount(choice.lengths, minlength=6)[1:].tolist()
    assert sum(counts) == 4000  # one n-gram per row, none empty
    _, p = stats.chisquare(counts, [800] * 5)
    assert p > 0.001, counts


def test_clipped_geometric_lengths_chi_square() -> None:
    ids, free = _rows(4000, 40)
    choice = choose_ngrams(
        ids, free, VOCAB, torch.Generator().manual_seed(2), max_ngram=10, geometric_p=0.2
    )
    counts = torch.bincount(choice.lengths, minlength=11)[1:].tolist()
    expected = [4000 * q for q in ngram_length_distribution(10, 0.2)]
    _, p = stats.chisquare(counts, expected)
    assert p > 0.001, counts


def test_start_is_uniform_over_the_valid_positions() -> None:
    # 30 free tokens: an n-gram of length n has 31 - n valid starts (1..31 - n).
    ids, free = _rows(6000, 32)
    choice = choose_ngrams(ids, free, VOCAB, torch.Generator().manual_seed(3))
    for n in (1, 5):
        starts = choice.starts[choice.lengths == n]
        counts = torch.bincount(starts - 1, minlength=31 - n).tolist()
        assert len(counts) == 31 - n, "a start outside the free tokens"
        _, p = stats.chisquare(counts)
        assert p > 0.001, (n, counts)


def test_the_ngram_is_all_mask_in_the_sentence_and_whole_in_its_own_view() -> None:
    ids, free = _rows(200, 24)
    choice = choose_ngrams(ids, free, VOCAB, torch.Generator().manual_seed(4))
    changed = choice.input_ids != ids
    assert bool((choice.input_ids[changed] == VOCAB.mask_id).all())
    assert changed.sum(dim=1).tolist() == choice.lengths.tolist()  # contiguous, all masked
    for row in range(len(ids)):
        s, n = int(choice.starts[row]), int(choice.lengths[row])
        view = choice.ngram_ids[row, : n + 2].tolist()
        assert view == [VOCAB.cls_id, *ids[row, s : s + n].tolist(), VOCAB.sep_id]
        assert int(choice.ngram_mask[row].sum()) == n + 2
        assert bool(changed[row, s : s + n].all())


def test_masked_share_binomial_and_mlm_positions_are_left_alone() -> None:
    """The DIM n-gram covers E[n] = 3 of a row's free tokens on average (binomial bound on
    the total), never a position the masked LM already chose, never a special token."""
    ids, free = _rows(2000, 64)
    mlm_labels = torch.full_like(ids, IGNORE_INDEX)
    picked = torch.rand(ids.shape, generator=torch.Generator().manual_seed(5)) < 0.15
    mlm_labels[picked & free] = ids[picked & free]
    objective = InfoWordObjective(VOCAB, encoder=torch.nn.Identity(), hidden_size=8)
    special = (~free).long()
    batch = {"input_ids": ids, "special_tokens_mask": special, "mlm_labels": mlm_labels}
    out = objective.collate(batch, torch.Generator().manual_seed(6))
    masked = out["input_ids"] != ids
    assert not bool((masked & (mlm_labels != IGNORE_INDEX)).any())
    assert not bool((masked & ~free).any())
    total = int(masked.sum())
    # n ~ U{1..5}: mean 3, variance 2, over 2000 rows -> sd sqrt(4000) ~ 63.
    assert abs(total - 6000) < 4 * math.sqrt(2 * 2000), total


def test_a_row_without_free_tokens_gets_no_ngram_and_a_short_run_a_shorter_one() -> None:
    ids, free = _rows(3, 12)
    free[0] = False
    free[1, 4:] = False  # 3 free tokens: 1..3
    choice = choose_ngrams(ids, free, VOCAB, torch.Generator().manual_seed(0))
    assert choice.has_ngram.tolist()[0] == 0 and int(choice.lengths[0]) == 0
    assert bool((choice.ngram_ids[0] == VOCAB.pad_id).all())
    assert 1 <= int(choice.lengths[1]) <= 3 and int(choice.starts[1]) >= 1
    assert torch.equal(choice.input_ids[0], ids[0])


def test_packed_rows_are_refused_with_the_fix() -> None:
    ids, free = _rows(2, 8)
    objective = InfoWordObjective(VOCAB, encoder=torch.nn.Identity(), hidden_size=8)
    batch = {"input_ids": ids, "special_tokens_mask": (~free).long(), "document_ids": ids * 0}
    with pytest.raises(ValueError, match=r"data\.pack=false"):
        objective.collate(batch, torch.Generator())
