"""A corpus line of one huge sentence must cost what the same text split into lines costs.

Issue 20, defect 2: a 5 MB one-sentence line never finished pre-training, because
``truncate_pair`` deleted one token at a time from the front of a list (each delete copies
the list) and the single-segment builder re-sliced the rest of the sentence for every row.
These tests count list operations instead of timing anything.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, overload

from ptm_core.data.segments import build_single_segment_examples, truncate_pair
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=1000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _reference_truncate(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    # BERT's create_pretraining_data.truncate_seq_pair, token by token.
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


class CountingList(list[int]):
    """A list that counts the calls that remove tokens from it."""

    removals = 0

    def __delitem__(self, key: Any) -> None:
        self.removals += 1
        super().__delitem__(key)

    def pop(self, index: Any = -1) -> int:
        self.removals += 1
        return super().pop(index)


def test_truncate_pair_keeps_the_reference_draws() -> None:
    # Same seed -> the same tokens kept as token-by-token trimming: seeded runs do not drift.
    cases = random.Random(7)
    for _ in range(300):
        a = list(range(cases.randint(0, 60)))
        b = list(range(100, 100 + cases.randint(0, 60)))
        max_tokens = cases.randint(1, 80)
        seed = cases.randrange(10**6)
        expected_a, expected_b = list(a), list(b)
        _reference_truncate(expected_a, expected_b, max_tokens, random.Random(seed))
        truncate_pair(a, b, max_tokens, random.Random(seed))
        assert (a, b) == (expected_a, expected_b)


def test_truncate_pair_cuts_each_segment_at_most_twice() -> None:
    a = CountingList(range(300_000))
    b = CountingList(range(50))
    truncate_pair(a, b, 125, random.Random(0))
    assert len(a) + len(b) == 125
    # One cut from the front and one from the back at most, whatever the excess.
    assert a.removals <= 2
    assert b.removals <= 2
    # What is kept is a contiguous run of the original segment.
    assert a == list(range(a[0], a[0] + len(a)))


class CountingSequence(Sequence[int]):
    """A sentence that counts how many token ids are read from it."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.read = 0

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            values = list(range(self.length))[index]
            self.read += len(values)
            return values
        if not -self.length <= index < self.length:
            raise IndexError(index)
        self.read += 1
        return index % self.length


def test_single_segment_rows_of_a_long_sentence_read_each_token_once() -> None:
    sentence = CountingSequence(20_000)
    rows = build_single_segment_examples([[sentence]], VOCAB, max_length=128)
    bodies = [row["input_ids"][1:-1] for row in rows]
    assert [len(body) for body in bodies[:-1]] == [126] * (len(bodies) - 1)
    assert [t for body in bodies for t in body] == list(range(20_000))
    assert sentence.read == 20_000  # each id read once: linear in the sentence


def test_a_long_sentence_gives_the_rows_of_the_same_tokens_split_into_sentences() -> None:
    long_line = list(range(10, 10_010))
    split = [long_line[i : i + 37] for i in range(0, len(long_line), 37)]
    one = build_single_segment_examples([[long_line]], VOCAB, max_length=64)
    many = build_single_segment_examples([split], VOCAB, max_length=64)
    assert [r["input_ids"] for r in one] == [r["input_ids"] for r in many]
