"""Golden test: ptm's GLM rows and mask against THUDM/GLM's arithmetic on hand-written spans.

The reference functions below transcribe, step for step, what THUDM/GLM does
(``blocklm_utils.py``: ``ConstructBlockStrategy.make_block_data`` with
``block_position_encoding=True``, ``sentinel_token=False``, spans already in their shuffled
order; ``mpu/transformer.py``: ``build_mask_matrix``): the cumsum of the position ids, the
``[sop]``/``[eop]`` shifting, and ``tril`` with the first ``sep`` columns set. Spans are given
by hand, so no random number generator is compared.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptm_core.modules.attention_structure import AttentionStructure
from ptm_text.glm.construction import build_blank_infilling

MASK, SOP, EOP = 103, 1, 2


def glm_make_block_data(tokens: list[int], spans_in_b_order: list[tuple[int, int]]):
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
        source_tokens.append([MASK])
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


def test_touching_spans_are_refused() -> None:
    with pytest.raises(ValueError, match="overlap or touch"):
        build_blank_infilling(
            list(range(8)), [(1, 3), (3, 5)], mask_id=MASK, start_id=SOP, end_id=EOP
        )
