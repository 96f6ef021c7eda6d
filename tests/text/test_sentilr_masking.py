"""SentiLARE's label-aware masking: the published rates (statistical tests, fixed seeds) and
the reference's construction, transcribed from thu-coai/SentiLARE ``pretrain/data_label.py``
(``random_whole_word``: 15% ordinary / 30% sentiment words, 80/10/10, POS "other" and
polarity "neutral" on masked or replaced words, POS/polarity targets; ``__getitem__``:
``task_ratio`` 0.2 late supervision, label ids ``[5] + [rating] * n + [5]`` for early fusion).
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from ptm_core.objectives.base import IGNORE_INDEX
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER
from ptm_text.sentilr.masking import label_aware_masking

MASK, CLS, SEP, PAD = 4, 2, 3, 0
NUM_LABELS = 5


def _batch(rows: int, words: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Rows of ``words`` words of 1-3 pieces each: [CLS] pieces [SEP] padding; a third of the
    words polar, POS uniform over the five classes."""
    gen = torch.Generator().manual_seed(seed)
    ids, index, pos, pol = [], [], [], []
    for _ in range(rows):
        row_ids, row_index, row_pos, row_pol = [CLS], [-1], [OTHER], [NEUTRAL]
        for word in range(words):
            pieces = int(torch.randint(1, 4, (1,), generator=gen))
            tag = int(torch.randint(0, 5, (1,), generator=gen))
            polar = float(torch.rand(1, generator=gen)) < 1 / 3
            polarity = int(torch.randint(0, 2, (1,), generator=gen)) if polar else NEUTRAL
            for _ in range(pieces):
                row_ids.append(int(torch.randint(10, 200, (1,), generator=gen)))
                row_index.append(word)
                row_pos.append(tag)
                row_pol.append(polarity)
        row_ids.append(SEP)
        row_index.append(-1)
        row_pos.append(OTHER)
        row_pol.append(NEUTRAL)
        ids.append(row_ids)
        index.append(row_index)
        pos.append(row_pos)
        pol.append(row_pol)
    length = max(len(r) for r in ids)

    def pad(rows_: list[list[int]], value: int) -> torch.Tensor:
        return torch.tensor([r + [value] * (length - len(r)) for r in rows_])

    return {
        "input_ids": pad(ids, PAD),
        "word_index": pad(index, -1),
        "pos": pad(pos, OTHER),
        "polarity": pad(pol, NEUTRAL),
        "labels": torch.randint(0, NUM_LABELS, (rows,), generator=gen),
    }


def _mask(batch: dict[str, torch.Tensor], seed: int = 0, **rates: float):
    return label_aware_masking(
        batch["input_ids"],
        batch["word_index"],
        batch["pos"],
        batch["polarity"],
        batch["labels"],
        num_labels=NUM_LABELS,
        mask_id=MASK,
        generator=torch.Generator().manual_seed(seed),
        **rates,
    )


@pytest.fixture(scope="module")
def big() -> dict[str, torch.Tensor]:
    return _batch(rows=1500, words=12, seed=1)


def test_ordinary_words_are_chosen_at_15_and_sentiment_words_at_30_percent(big) -> None:
    out = _mask(big, seed=2)
    sentiment = out.sentiment_words
    for share, words in ((0.15, ~sentiment), (0.30, sentiment)):
        n, k = int(words.sum()), int((out.chosen_words & words).sum())
        assert n > 3000
        assert stats.binomtest(k, n, share).pvalue > 1e-3, (share, k / n)


def test_the_rate_test_has_power_a_wrong_rate_fails_it(big) -> None:
    out = _mask(big, seed=2, word_prob=0.17)
    ordinary = ~out.sentiment_words
    k, n = int((out.chosen_words & ordinary).sum()), int(ordinary.sum())
    assert stats.binomtest(k, n, 0.15).pvalue < 1e-3


def test_chosen_words_are_masked_replaced_or_kept_80_10_10(big) -> None:
    out = _mask(big, seed=3)
    actions = out.action[out.chosen_words]
    observed = torch.bincount(actions, minlength=3).tolist()
    expected = [0.8 * len(actions), 0.1 * len(actions), 0.1 * len(actions)]
    assert stats.chisquare(observed, expected).pvalue > 1e-3, observed


def test_one_row_in_five_is_late_supervision(big) -> None:
    rows = big["input_ids"].shape[0]
    late = sum(int(_mask(big, seed=s).late.sum()) for s in range(4))
    assert stats.binomtest(late, 4 * rows, 0.2).pvalue > 1e-3, late / (4 * rows)


def _reference(batch: dict[str, torch.Tensor], out) -> dict[str, list[list[int]]]:
    """The reference's per-word rules, given the words it chose and what it did to them."""
    expected: dict[str, list[list[int]]] = {
        k: []
        for k in ("pos", "polarity", "token_labels", "pos_labels", "polarity_labels", "label_ids")
    }
    for r in range(batch["input_ids"].shape[0]):
        late = bool(out.late[r])
        rows = {k: [] for k in expected}
        for j in range(batch["input_ids"].shape[1]):
            word = int(batch["word_index"][r, j])
            token = int(batch["input_ids"][r, j])
            ori_p, ori_s = int(batch["pos"][r, j]), int(batch["polarity"][r, j])
            chosen = word >= 0 and bool(out.chosen_words[r, word])
            action = int(out.action[r, word]) if chosen else 2
            changed = chosen and action in (0, 1)
            rows["pos"].append(OTHER if changed else ori_p)
            rows["polarity"].append(NEUTRAL if changed else ori_s)
            rows["token_labels"].append(token if chosen else IGNORE_INDEX)
            # senti words always; ordinary words only when their POS is not "other" (u)
            knows = chosen and (ori_s != NEUTRAL or ori_p != OTHER)
            rows["pos_labels"].append(ori_p if knows else IGNORE_INDEX)
            rows["polarity_labels"].append(ori_s if knows else IGNORE_INDEX)
            on_word = word >= 0
            rows["label_ids"].append(
                int(batch["labels"][r]) if on_word and not late else NUM_LABELS
            )
        for key in expected:
            expected[key].append(rows[key])
    return expected


def test_the_construction_matches_the_reference_rules() -> None:
    batch = _batch(rows=40, words=9, seed=5)
    out = _mask(batch, seed=6)
    for key, rows in _reference(batch, out).items():
        assert getattr(out, key).tolist() == rows, key
    chosen_pieces = out.token_labels != IGNORE_INDEX
    action = out.action.gather(1, batch["word_index"].clamp(min=0))
    masked = chosen_pieces & (action == 0)
    kept = chosen_pieces & (action == 2)
    assert (out.input_ids[masked] == MASK).all()
    assert torch.equal(out.input_ids[kept], batch["input_ids"][kept])
    untouched = ~chosen_pieces
    assert torch.equal(out.input_ids[untouched], batch["input_ids"][untouched])
    replaced = chosen_pieces & (action == 1)
    real = batch["input_ids"][batch["word_index"] >= 0]
    assert torch.isin(out.input_ids[replaced], real).all()  # pieces of the batch's words
    # every piece of a word shares the word's fate
    assert torch.equal(chosen_pieces, out.chosen_words.gather(1, batch["word_index"].clamp(min=0))
                       & (batch["word_index"] >= 0))  # fmt: skip
    # the label: a target at [CLS] on late rows only
    assert torch.equal(out.label_targets[out.late], batch["labels"][out.late])
    assert (out.label_targets[~out.late] == IGNORE_INDEX).all()


def test_same_generator_same_masking_and_inputs_untouched() -> None:
    batch = _batch(rows=8, words=6, seed=7)
    before = {k: v.clone() for k, v in batch.items()}
    first, again = _mask(batch, seed=9), _mask(batch, seed=9)
    assert all(torch.equal(batch[k], before[k]) for k in batch)
    assert torch.equal(first.input_ids, again.input_ids)
    assert torch.equal(first.label_ids, again.label_ids)


@pytest.mark.parametrize("key", ["word_prob", "sentiment_word_prob", "late_supervision_prob"])
def test_a_rate_outside_0_1_names_the_key(key: str) -> None:
    with pytest.raises(ValueError, match=key):
        _mask(_batch(rows=2, words=3), **{key: 1.5})
