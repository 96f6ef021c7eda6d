"""Sentence boundaries carried into single-segment rows (``sentence_starts``): from an
in-memory store and from a prepared, sharded corpus, checked against boundaries counted by
hand from the documents' sentences."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from ptm_core.data.layouts import SENTENCE_STARTS, SegmentRows, plan_single_segments
from ptm_core.data.packing import pack_examples
from ptm_core.data.prepare import prepare_corpus
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=1000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _documents(rng: random.Random) -> list[list[list[int]]]:
    return [
        [
            [rng.randrange(10, 900) for _ in range(rng.randint(1, 17))]
            for _ in range(rng.randint(1, 9))
        ]
        for _ in range(40)
    ]


def _all_starts(store: TokenStore) -> set[int]:
    starts: set[int] = set()
    for document in range(store.num_documents):
        starts.update(store.sentence_offsets(document)[:-1].tolist())
    return starts


def _check_rows(store: TokenStore, max_length: int) -> int:
    plan = plan_single_segments(store, max_length)
    rows = SegmentRows(store, plan, VOCAB, sentence_starts=True)
    starts = _all_starts(store)
    flagged = 0
    for index, (start, length) in enumerate(plan.tolist()):
        flags = rows[index][SENTENCE_STARTS]
        want = [0] + [int(start + i in starts) for i in range(length)] + [0]
        assert flags == want, index
        flagged += sum(flags)
    return flagged


@pytest.mark.parametrize("max_length", [8, 20, 64])
def test_rows_flag_exactly_the_sentence_starts_in_memory(max_length: int) -> None:
    documents = _documents(random.Random(max_length))
    store = InMemoryTokenStore(documents)
    flagged = _check_rows(store, max_length)
    assert flagged == sum(len(d) for d in documents)  # every sentence begins in one row


def test_rows_flag_the_sentence_starts_of_a_prepared_corpus(tmp_path: Path) -> None:
    """A generated corpus (not the samples), cut in several shards, read memory-mapped."""
    rng = random.Random(3)
    words = [f"w{i}" for i in range(60)]
    lines: list[str] = []
    for _ in range(120):
        for _ in range(rng.randint(1, 6)):
            lines.append(" ".join(rng.choices(words, k=rng.randint(2, 12))) + " .")
        lines.append("")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    store = prepare_corpus(
        [corpus],
        tmp_path / "prepared",
        vocab_size=120,
        workers=0,
        shard_bytes=2_000,
        progress=False,
    )
    assert len(store.manifest["shards"]) > 1
    flagged = _check_rows(store, 24)
    assert flagged == store.num_sentences


def test_without_the_switch_rows_are_unchanged() -> None:
    store = InMemoryTokenStore([[[10, 11], [12, 13, 14]]])
    plan = plan_single_segments(store, 16)
    plain = SegmentRows(store, plan, VOCAB)[0]
    flagged = SegmentRows(store, plan, VOCAB, sentence_starts=True)[0]
    assert SENTENCE_STARTS not in plain
    assert flagged[SENTENCE_STARTS] == [0, 1, 0, 1, 0, 0, 0]
    assert {k: v for k, v in flagged.items() if k != SENTENCE_STARTS} == plain


def test_a_range_inside_a_sentence_has_no_start() -> None:
    store = InMemoryTokenStore([[[10, 11, 12, 13], [14, 15]]])
    assert store.sentence_starts(1, 4).tolist() == []
    assert store.sentence_starts(0, 6).tolist() == [0, 4]
    assert np.asarray(store.sentence_starts(4, 5)).tolist() == [4]


def test_packing_keeps_the_flags() -> None:
    store = InMemoryTokenStore([[[10, 11], [12]], [[13, 14, 15]]])
    rows = list(SegmentRows(store, plan_single_segments(store, 16), VOCAB, sentence_starts=True))
    (packed,) = pack_examples(rows, 32)
    assert packed[SENTENCE_STARTS] == [0, 1, 0, 1, 0, 0, 1, 0, 0, 0]  # two rows of 5
