"""Golden test: ptm's GLM rows and mask against THUDM/GLM's arithmetic on hand-written spans.

The reference functions below transcribe, step for step, what THUDM/GLM does
(``blocklm_utils.py``: ``ConstructBlockStrategy.make_block_data`` with
``block_position_encoding=True``, ``sentinel_token=False``, spans already in their shuffled
order; ``mpu/transformer.py``: ``build_mask_matrix``): the cumsum of the position ids, the
``[sop]``/``[eop]`` shifting, and ``tril`` with the first ``sep`` columns set. Spans are given
by hand, so no random number generator is compared.

The sentence-level task (GLM-Sent) transcribes the ``gap_sentence`` branch of
``construct_blocks``: sentence spans cut after every sentence-end token (``[ENC]`` and
``eos`` excluded), taken in shuffled order until ``int(gap_sentence_ratio * len(tokens))``
tokens are covered, then ``make_block_data(task='gap_sentence')`` with ``[sMASK]``. The two
shuffles are given as permutations, and ptm gets the same sentences as its
``sentence_starts`` flags (ptm reads sentence boundaries from the corpus, GLM from the
punctuation of the token text; the cases are text where the two agree).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptm_core.modules.attention_structure import AttentionStructure
from ptm_text.glm.construction import (
    SENTENCE,
    build_blank_infilling,
    choose_sentences,
    row_sentences,
)

MASK, SOP, EOP = 103, 1, 2
SMASK = 104  # GLM's [sMASK] (--task-mask)
ENC, EOS = 101, 102  # GLM's [CLS] and eos (ptm: [CLS] and [SEP])
PERIOD, BANG = 7, 8  # sentence-end tokens (GLM: '.', '!', ... in the token's text)


def glm_make_block_data(
    tokens: list[int], spans_in_b_order: list[tuple[int, int]], mask_id: int = MASK
):
    """THUDM/GLM's arithmetic for one row (transcribed, not imported)."""
    tokens = np.array(tokens)
    position_ids = np.ones(len(tokens), dtype=np.int64)
    for start, end in spans_in_b_order:
        position_ids[start + 1 : end] = 0
    position_ids = np.cumsum(position_ids) - 1
    target_tokens, target_position_ids, target_block_position_ids, targets = [], [], [], []
    for start, end in spans_in_b_order:
        target_tokens.append([SOP])
        target_tokens.append(tokens[start:end])
        targets.append(tokens[start:end])
        targets.append([EOP])
        target_position_id = position_ids[start:end]
        target_position_ids.append(target_position_id)
        target_position_ids.append([target_position_id[0]])
        target_block_position_ids.append(np.arange(1, end - start + 2, dtype=np.int64))
    source_tokens, source_position_ids = [], []
    last = 0
    for start, end in sorted(spans_in_b_order):
        source_tokens.append(tokens[last:start])
        source_tokens.append([mask_id])
        source_position_ids.append(position_ids[last:start])
        source_position_ids.append([position_ids[start]])
        last = end
    if last < len(tokens):
        source_tokens.append(tokens[last:])
        source_position_ids.append(position_ids[last:])
    source_length = sum(map(len, source_tokens))
    out_tokens = np.concatenate(source_tokens + target_tokens)
    out_targets = np.concatenate(source_tokens + targets)
    loss_masks = np.ones(len(out_tokens), dtype=np.int64)
    loss_masks[:source_length] = 0
    pos = np.concatenate(source_position_ids + target_position_ids)
    block = np.concatenate([np.zeros(source_length, dtype=np.int64), *target_block_position_ids])
    return out_tokens, out_targets, loss_masks, pos, block, source_length


def glm_mask(seq_length: int, sep: int) -> torch.Tensor:
    """``build_mask_matrix`` for one row: causal, plus every query sees the first sep keys."""
    m = torch.tril(torch.ones(seq_length, seq_length))
    m[:, :sep] = 1
    return m.bool()


CASES = [
    # tokens, spans in part-B order
    (list(range(10, 22)), [(3, 5), (7, 10)]),
    (list(range(10, 22)), [(7, 10), (3, 5)]),  # shuffled: B order differs from A order
    (list(range(10, 20)), [(1, 2)]),  # a one-token span
    (list(range(10, 26)), [(12, 15), (1, 4), (6, 7), (9, 11)]),
    (list(range(10, 30)), [(2, 18)]),  # a document-level span
    (list(range(10, 18)), [(0, 2), (5, 8)]),  # spans at both ends of the row
]


@pytest.mark.parametrize(("tokens", "spans"), CASES)
def test_rows_equal_thudm_glm(tokens: list[int], spans: list[tuple[int, int]]) -> None:
    want = glm_make_block_data(tokens, spans)
    got = build_blank_infilling(tokens, spans, mask_id=MASK, start_id=SOP, end_id=EOP)
    assert got.input_ids == want[0].tolist()
    assert got.targets == want[1].tolist()
    assert got.loss_mask == want[2].tolist()
    assert got.position_ids == want[3].tolist()
    assert got.block_position_ids == want[4].tolist()
    assert got.sep == want[5]


def test_hand_computed_case() -> None:
    """One case written out by hand, so the transcription above is itself checked."""
    got = build_blank_infilling(
        [5, 6, 7, 8, 9, 10], [(4, 6), (1, 2)], mask_id=MASK, start_id=SOP, end_id=EOP
    )
    assert got.input_ids == [5, MASK, 7, 8, MASK, SOP, 9, 10, SOP, 6]
    assert got.targets == [5, MASK, 7, 8, MASK, 9, 10, EOP, 6, EOP]
    assert got.loss_mask == [0] * 5 + [1] * 5
    assert got.position_ids == [0, 1, 2, 3, 4, 4, 4, 4, 1, 1]
    assert got.block_position_ids == [0] * 5 + [1, 2, 3, 1, 2]
    assert got.sep == 5


@pytest.mark.parametrize(("tokens", "spans"), CASES)
def test_structure_equals_glm_mask(tokens: list[int], spans: list[tuple[int, int]]) -> None:
    """Part A bidirectional, part B causal and seeing all of A: a prefix structure built
    from per-token [B, L] tensors has GLM's mask as its dense form, with padding hidden."""
    row = build_blank_infilling(tokens, spans, mask_id=MASK, start_id=SOP, end_id=EOP)
    length = len(row.input_ids)
    pad = 3
    part = torch.tensor([[0] * row.sep + [1] * (length - row.sep) + [1] * pad])
    real = torch.tensor([[True] * length + [False] * pad])
    dense = AttentionStructure.prefix(real, part).dense()[0]
    assert torch.equal(dense[:length, :length], glm_mask(length, row.sep))
    assert not dense[length:].any() and not dense[:, length:].any()


def test_overlapping_spans_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap"):
        build_blank_infilling(
            list(range(8)), [(1, 4), (3, 5)], mask_id=MASK, start_id=SOP, end_id=EOP
        )


def glm_sentence_spans(tokens: list[int]) -> list[tuple[int, int]]:
    """The ``gap_sentence`` branch's sentence spans of one sample (transcribed)."""
    sentence_spans = []
    last_index = 1 if tokens[0] == ENC else 0
    for i in range(len(tokens)):
        if tokens[i] in (PERIOD, BANG):
            if last_index < i + 1:
                sentence_spans.append((last_index, i + 1))
            last_index = i + 1
        elif tokens[i] == EOS:
            last_index = i + 1
    if last_index < len(tokens):
        sentence_spans.append((last_index, len(tokens)))
    return sentence_spans


def glm_choose_sentences(tokens: list[int], shuffled: list[tuple[int, int]], ratio: float):
    """The ``gap_sentence`` branch's choice after ``rng.shuffle(sentence_spans)``."""
    block_spans, block_length = [], 0
    for start, end in shuffled:
        block_spans.append((start, end))
        block_length += end - start
        if block_length >= int(ratio * len(tokens)):
            break
    return block_spans


def _row(sentences: list[list[int]], cut_first: int = 0) -> tuple[list[int], list[int]]:
    """``[CLS] sentences [SEP]`` and ptm's ``sentence_starts`` flags; ``cut_first`` tokens
    of the first sentence are cut off (a row that starts inside a sentence)."""
    tokens, flags = [ENC], [0]
    for i, sentence in enumerate(sentences):
        part = sentence[cut_first:] if i == 0 else sentence
        tokens += part
        flags += [int(i > 0 or cut_first == 0)] + [0] * (len(part) - 1)
    return [*tokens, EOS], [*flags, 0]


SENTENCE_CASES = [
    # sentences (each ends with a sentence-end token), first-sentence cut, shuffle, B order
    ([[10, 11, 12, PERIOD], [13, 14, PERIOD], [15, 16, 17, 18, BANG]], 0, [1, 0, 2], [0]),
    (
        [[10, PERIOD], [11, PERIOD], [12, PERIOD], [13, PERIOD]] * 3,
        0,
        list(range(12))[::-1],
        [1, 0],
    ),
    (
        [[20 + i for i in range(9)] + [PERIOD], [40, 41, PERIOD], [50, 51, 52, PERIOD]],
        4,
        [0, 2, 1],
        [0],
    ),  # the row starts inside its first sentence
    (
        [
            [30, 31, 32, PERIOD],
            [33, 34, 35, 36, 37, 38, 39, 40, PERIOD],
            [41, 42, PERIOD],
            [43, PERIOD],
            [44, 45, 46, PERIOD],
            [47, 48, 49, 50, 51, PERIOD],
        ]
        * 2,
        0,
        [3, 4, 6, 0, 1, 2, 5, 7, 8, 9, 10, 11],
        [2, 0, 1],
    ),  # adjacent sentences chosen
]


@pytest.mark.parametrize(("sentences", "cut", "shuffle", "b_order"), SENTENCE_CASES)
def test_sentence_rows_equal_thudm_glm(sentences, cut, shuffle, b_order) -> None:
    tokens, flags = _row(sentences, cut)
    want_sentences = glm_sentence_spans(tokens)
    assert row_sentences(flags) == want_sentences
    shuffled = [want_sentences[j] for j in shuffle]
    want_chosen = glm_choose_sentences(tokens, shuffled, 0.15)
    got_chosen = choose_sentences(shuffled, len(tokens), 0.15)
    assert got_chosen == want_chosen
    spans = [got_chosen[j] for j in b_order]
    want = glm_make_block_data(tokens, spans, mask_id=SMASK)
    got = build_blank_infilling(
        tokens, spans, mask_id=MASK, start_id=SOP, end_id=EOP, task=SENTENCE
    )
    assert got.task_ids is not None
    # ptm's [sMASK] is [MASK] marked with the sentence task.
    ids = [SMASK if t == SENTENCE else i for i, t in zip(got.input_ids, got.task_ids, strict=True)]
    assert ids == want[0].tolist()
    assert [
        SMASK if t == SENTENCE else i for i, t in zip(got.targets, got.task_ids, strict=True)
    ] == (want[1].tolist())
    assert got.loss_mask == want[2].tolist()
    assert got.position_ids == want[3].tolist()
    assert got.block_position_ids == want[4].tolist()
    assert got.sep == want[5]
    assert sum(1 for t in got.task_ids if t == SENTENCE) == len(spans)


def test_adjacent_sentences_give_two_smask_in_a_row() -> None:
    """Written out by hand: sentences (1, 3) and (3, 5) both blanked."""
    tokens = [ENC, 10, PERIOD, 11, PERIOD, 12, PERIOD, EOS]
    got = build_blank_infilling(
        tokens, [(3, 5), (1, 3)], mask_id=MASK, start_id=SOP, end_id=EOP, task=SENTENCE
    )
    assert got.input_ids == [ENC, MASK, MASK, 12, PERIOD, EOS, SOP, 11, PERIOD, SOP, 10, PERIOD]
    assert got.task_ids == [0, SENTENCE, SENTENCE, 0, 0, 0] + [0] * 6
    assert got.position_ids == [0, 1, 2, 3, 4, 5, 2, 2, 2, 1, 1, 1]
    assert got.block_position_ids == [0] * 6 + [1, 2, 3, 1, 2, 3]
