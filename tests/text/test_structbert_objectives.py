"""StructBERT's objectives: the published rates (5% trigrams, 1/3 next/previous/random) as
statistical tests with fixed seeds, where the shuffles may and may not go, and the contract
every objective passes (tests/core/objectives/cases.py).

AliceMind's StructBERT folder (alibaba/AliceMind, StructBERT/) ships fine-tuning code only,
no pre-training data construction, so these follow the paper (Wang et al., 2019, Sec. 2.2
and 2.3) rather than a reference implementation.
"""

from __future__ import annotations

import functools
import random
from typing import ClassVar

import pytest
import torch
from cases import ObjectiveTestCase, token_batch
from scipy import stats

from ptm_core import bert_encoder
from ptm_core.checkpoints.init_report import check_segment_objectives
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mlm import mask_tokens
from ptm_core.tokenization import VocabInfo
from ptm_text.structbert import (
    SentenceStructuralObjective,
    WordStructuralObjective,
    eligible_positions,
    select_ngrams,
)
from ptm_text.structbert.sentence_structural import LABEL_KEY, NEXT, PREVIOUS, RANDOM
from ptm_text.structbert.word_structural import LABELS_KEY

VOCAB = VocabInfo(vocab_size=10_000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _encoder() -> torch.nn.Module:
    return bert_encoder(vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=1, num_heads=2)


def _distinct_rows(rows: int, length: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Pair rows of distinct ids (``[CLS] a [SEP] b [SEP] [PAD]..``) of varied lengths."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.stack(
        [torch.randperm(VOCAB.vocab_size - 10, generator=gen)[:length] + 10 for _ in range(rows)]
    )
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=gen)
    positions = torch.arange(length)[None, :]
    pad = positions >= lengths[:, None]
    middle = lengths // 2
    ids[:, 0] = VOCAB.cls_id
    ids[torch.arange(rows), middle] = VOCAB.sep_id
    ids[torch.arange(rows), lengths - 1] = VOCAB.sep_id
    ids[pad] = VOCAB.pad_id
    special = (ids == VOCAB.cls_id) | (ids == VOCAB.sep_id) | pad
    return {
        "input_ids": ids,
        "attention_mask": (~pad).long(),
        "token_type_ids": (positions > middle[:, None]).long() & ~pad,
        "special_tokens_mask": special.long(),
    }


def _mlm_then_word(batch: dict[str, torch.Tensor], seed: int = 0) -> tuple[dict, dict]:
    """MLM's data side, then the word-structural one, as the structbert mix runs them."""
    gen = torch.Generator().manual_seed(seed)
    ids, labels = mask_tokens(batch["input_ids"], batch["special_tokens_mask"], VOCAB, gen)
    masked = {**batch, "input_ids": ids, "mlm_labels": labels}
    word = build_objective(WordStructuralObjective, _encoder(), VOCAB)
    return masked, word.collate(masked, gen)


def test_shuffled_trigrams_cover_five_percent_of_the_unmasked_tokens() -> None:
    masked, out = _mlm_then_word(_distinct_rows(2000, 128), seed=1)
    eligible = eligible_positions(
        masked["special_tokens_mask"], masked["mlm_labels"], masked["attention_mask"]
    )
    n = eligible.sum(dim=1).double()  # (B,)
    shuffled = (out[LABELS_KEY] != IGNORE_INDEX).sum(dim=1).double()
    assert bool((shuffled % 3 == 0).all())
    # Per row: k = floor(x + u) trigrams with x = 0.05 n / 3, so k - floor(x) ~ Bernoulli(frac(x)).
    x = 0.05 * n / 3
    frac = x - x.floor()
    z = ((shuffled / 3).sum() - x.sum()) / (frac * (1 - frac)).sum().sqrt()
    assert abs(float(z)) < 4.0, float(z)
    share = float(shuffled.sum() / n.sum())
    assert share == pytest.approx(0.05, abs=0.002)


def test_trigram_starts_are_uniform_over_the_windows() -> None:
    # 30 eligible tokens, rate chosen so each row gets exactly one trigram: 28 windows.
    eligible = torch.ones(14_000, 30, dtype=torch.bool)
    starts = select_ngrams(eligible, rate=3 / 30, generator=torch.Generator().manual_seed(2))
    assert bool((starts.sum(dim=1) == 1).all())
    counts = starts[:, :28].sum(dim=0).double()
    assert int(starts[:, 28:].sum()) == 0
    assert stats.chisquare(counts.numpy()).pvalue > 1e-3


def test_shuffles_never_touch_special_masked_or_padding_tokens() -> None:
    batch = _distinct_rows(300, 64, seed=3)
    masked, out = _mlm_then_word(batch, seed=3)
    moved = out["input_ids"] != masked["input_ids"]
    labelled = out[LABELS_KEY] != IGNORE_INDEX
    assert bool(labelled.any())
    forbidden = masked["special_tokens_mask"].bool() | (masked["mlm_labels"] != IGNORE_INDEX)
    assert not bool((labelled & forbidden).any())
    assert not bool((moved & ~labelled).any())
    # MLM's targets and corrupted ids are kept as MLM left them.
    assert torch.equal(out["mlm_labels"], masked["mlm_labels"])
    assert torch.equal(out["input_ids"][forbidden], masked["input_ids"][forbidden])


def test_labels_reconstruct_the_original_order_of_each_shuffled_trigram() -> None:
    masked, out = _mlm_then_word(_distinct_rows(200, 64, seed=4), seed=4)
    labels, before, after = out[LABELS_KEY], masked["input_ids"], out["input_ids"]
    selected = labels != IGNORE_INDEX
    assert torch.equal(labels[selected], before[selected])
    # A maximal run of shuffled positions is whole trigrams laid end to end.
    trigrams = 0
    for row in range(len(labels)):
        flags = [*selected[row].tolist(), False]
        col = 0
        while col < len(flags) - 1:
            if not flags[col]:
                col += 1
                continue
            end = flags.index(False, col)
            assert (end - col) % 3 == 0
            for start in range(col, end, 3):
                span = slice(start, start + 3)
                # the same three tokens, never in their original order (all ids distinct)
                assert sorted(after[row, span].tolist()) == sorted(before[row, span].tolist())
                assert after[row, span].tolist() != before[row, span].tolist()
                trigrams += 1
            col = end
    assert trigrams * 3 == int(selected.sum()) > 0


def test_the_loss_refuses_mlm_listed_after_word_structural() -> None:
    encoder = _encoder()
    word = build_objective(WordStructuralObjective, encoder, VOCAB)
    mlm = build_objective(MaskedLMObjective, encoder, VOCAB)
    mix = ObjectiveMix({"word_structural": word, "mlm": mlm})  # the wrong order
    batch = mix.collate(_distinct_rows(64, 64, seed=5), torch.Generator().manual_seed(5))
    hidden = encoder(batch["input_ids"], attention_mask=batch["attention_mask"])
    with pytest.raises(ValueError, match="list the mlm objective before word_structural"):
        mix(hidden, batch)


def _documents(count: int, seed: int = 0) -> list[list[list[int]]]:
    """Documents whose token ids increase through each document: id = 100 + 1000 d + i."""
    rng = random.Random(seed)
    docs = []
    for d in range(count):
        position, doc = 0, []
        for _ in range(rng.randint(3, 12)):
            size = rng.randint(2, 25)
            doc.append([100 + 1000 * d + position + i for i in range(size)])
            position += size
        docs.append(doc)
    return docs


def _sentence_objective() -> SentenceStructuralObjective:
    return build_objective(SentenceStructuralObjective, _encoder(), VOCAB)


def _segments(example: dict) -> tuple[list[int], list[int]]:
    ids, types = example["input_ids"], example["token_type_ids"]
    first = [t for t, ty in zip(ids, types, strict=True) if ty == 0 and t >= 100]
    second = [t for t, ty in zip(ids, types, strict=True) if ty == 1 and t >= 100]
    return first, second


def test_next_previous_and_random_are_a_third_each_and_mean_what_they_say() -> None:
    examples = _sentence_objective().build_examples(_documents(1500), 64, random.Random(0))
    labels = [e[LABEL_KEY] for e in examples]
    counts = [labels.count(k) for k in (NEXT, PREVIOUS, RANDOM)]
    assert len(examples) >= 3000
    assert stats.chisquare(counts).pvalue > 1e-3, counts
    for example in examples:
        first, second = _segments(example)
        first_doc, second_doc = {t // 1000 for t in first}, {t // 1000 for t in second}
        assert len(first_doc) == 1 and len(second_doc) == 1
        label = example[LABEL_KEY]
        if label == RANDOM:
            assert first_doc != second_doc
        elif label == NEXT:
            assert first_doc == second_doc and max(first) < min(second)
        else:
            assert first_doc == second_doc and max(second) < min(first)


def test_prepared_rows_equal_the_in_memory_examples() -> None:
    from ptm_core.data.token_store import InMemoryTokenStore

    objective = _sentence_objective()
    docs = _documents(50, seed=6)
    rows = objective.rows(InMemoryTokenStore(docs), 48, seed=7)
    assert list(rows) == objective.build_examples(docs, 48, random.Random(7))


@pytest.mark.parametrize("random_prob, previous_prob", [(1.0, 0.0), (0.5, 0.6), (0.2, -0.1)])
def test_bad_rates_name_the_setting(random_prob: float, previous_prob: float) -> None:
    with pytest.raises(ValueError, match="random_prob"):
        build_objective(
            SentenceStructuralObjective,
            _encoder(),
            VOCAB,
            random_prob=random_prob,
            previous_prob=previous_prob,
        )


def test_an_encoder_with_one_token_type_is_refused_with_the_fix() -> None:
    """The sentence task embeds S2 as token type 1: core's segment check names it (not MLM)."""
    assert SentenceStructuralObjective.needs_segments
    assert not WordStructuralObjective.needs_segments
    factories = {
        "mlm": MaskedLMObjective,
        "word_structural": WordStructuralObjective,
        "sentence_structural": functools.partial(SentenceStructuralObjective, random_prob=0.3),
    }
    with pytest.raises(ValueError, match=r"second segment of sentence_structural has") as err:
        check_segment_objectives("init_from=roberta", 1, factories)
    assert "'~objective.objectives.sentence_structural'" in str(err.value)
    assert "~objective.objectives.mlm" not in str(err.value)
    check_segment_objectives("init_from=bert", 2, factories)  # two types: accepted


def test_the_sentence_head_is_three_way() -> None:
    objective = _sentence_objective()
    out = objective(
        EncoderOutput(last_hidden_state=torch.randn(3, 5, 16)),
        {LABEL_KEY: torch.tensor([NEXT, PREVIOUS, RANDOM])},
    )
    assert objective.head.classifier.out_features == 3
    assert out.loss.ndim == 0 and 0.0 <= out.metrics["accuracy"].item() <= 1.0


class TestWordStructuralContract(ObjectiveTestCase):
    objective_cls = WordStructuralObjective
    kwargs: ClassVar[dict[str, float]] = {
        "rate": 0.2
    }  # the contract's 16-token rows: a trigram in most rows


class TestSentenceStructuralContract(ObjectiveTestCase):
    objective_cls = SentenceStructuralObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        return {**token_batch(), LABEL_KEY: torch.tensor([NEXT, PREVIOUS, RANDOM, NEXT])}
