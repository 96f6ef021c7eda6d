"""Planned layouts: the same rows as building from token lists, built lazily, cached.

The reference builders here are the token-list algorithms the layouts replaced (Google's
``create_instances_from_document`` with an exact label rate, and RoBERTa's DOC-SENTENCES
rows), kept as the readable specification: plans must give exactly their rows.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch

from ptm_core.data.batches import PretrainingBatches
from ptm_core.data.layouts import (
    SegmentPairRows,
    SegmentRows,
    cached_plan,
    plan_segment_pairs,
    plan_single_segments,
)
from ptm_core.data.packing import pack_examples
from ptm_core.data.row_views import PackedRows, StaticDataSide
from ptm_core.data.segments import truncate_pair
from ptm_core.data.token_store import InMemoryTokenStore
from ptm_core.objectives.sop import build_sentence_order_examples
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=1000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _encode(a: list[int], b: list[int] | None) -> dict[str, Any]:
    ids = [VOCAB.cls_id, *a, VOCAB.sep_id] + ([*b, VOCAB.sep_id] if b is not None else [])
    types = [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b is not None else [])
    special = [0] * len(ids)
    special[0] = special[len(a) + 1] = special[-1] = 1
    return {"input_ids": ids, "token_type_ids": types, "special_tokens_mask": special}


def _reference_pairs(documents, max_length, rng, random_next_prob, short_seq_prob):
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    non_empty = [i for i, d in enumerate(docs) if d]
    max_tokens = max_length - 3
    examples = []
    for doc_index in non_empty:
        document = docs[doc_index]
        target = max_tokens
        if rng.random() < short_seq_prob:
            target = rng.randint(2, max_tokens)
        chunk: list[list[int]] = []
        length, is_random, i = 0, False, 0
        while i < len(document):
            if not chunk:
                is_random = rng.random() < random_next_prob
            chunk.append(document[i])
            length += len(document[i])
            at_end = i == len(document) - 1
            need_more = not is_random and len(chunk) < 2 and not at_end
            if (at_end or length >= target) and not need_more:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for s in chunk[:a_end] for t in s]
                if is_random:
                    other = rng.randrange(len(non_empty) - 1)
                    other_doc = docs[non_empty[other + (non_empty[other] >= doc_index)]]
                    b = []
                    for sentence in other_doc[rng.randrange(len(other_doc)) :]:
                        b.extend(sentence)
                        if len(b) >= max(target - len(a), 1):
                            break
                    i -= len(chunk) - a_end
                elif len(chunk) >= 2:
                    b = [t for s in chunk[a_end:] for t in s]
                else:
                    sentence = chunk[0]
                    if len(sentence) < 2:
                        chunk, length = [], 0
                        i += 1
                        continue
                    cut = rng.randint(1, len(sentence) - 1)
                    a, b = sentence[:cut], sentence[cut:]
                truncate_pair(a, b, max_tokens, rng)
                if a and b:
                    examples.append({**_encode(a, b), "next_sentence_label": int(is_random)})
                chunk, length = [], 0
                if target != max_tokens and rng.random() >= short_seq_prob:
                    target = max_tokens
            i += 1
    return examples


def _reference_single(documents, max_length):
    budget, rows = max_length - 2, []
    for document in documents:
        row: list[int] = []
        for sentence in document:
            for token in sentence:
                row.append(token)
                if len(row) == budget:
                    rows.append(_encode(row, None))
                    row = []
        if row:
            rows.append(_encode(row, None))
    for r in rows:
        r["token_type_ids"] = [0] * len(r["input_ids"])
    return rows


def _random_documents(rng: random.Random) -> list[list[list[int]]]:
    return [
        [
            [rng.randint(5, 999) for _ in range(rng.choice([0, 1, 2, 5, 20, 70]))]
            for _ in range(rng.randint(0, 7))
        ]
        for _ in range(rng.randint(2, 9))
    ]


def test_pair_plans_give_the_reference_rows() -> None:
    cases, checked = random.Random(11), 0
    while checked < 300:
        documents = _random_documents(cases)
        if sum(1 for d in documents if any(d)) < 2:
            continue
        max_length = cases.choice([5, 9, 16, 64, 128])
        seed = cases.randrange(10**6)
        rates = {
            "random_next_prob": cases.choice([0.0, 0.5, 1.0]),
            "short_seq_prob": cases.choice([0.0, 0.1, 0.6]),
        }
        expected = _reference_pairs(documents, max_length, random.Random(seed), **rates)
        store = InMemoryTokenStore(documents)
        plan = plan_segment_pairs(store, max_length, random.Random(seed), **rates)
        rows = SegmentPairRows(
            store, plan, VOCAB, label_key="next_sentence_label", with_documents=False
        )
        assert list(rows) == expected
        checked += 1


def test_single_segment_plans_give_the_reference_rows() -> None:
    cases = random.Random(3)
    for _ in range(200):
        documents = _random_documents(cases)
        max_length = cases.choice([3, 4, 10, 64])
        store = InMemoryTokenStore(documents)
        rows = SegmentRows(store, plan_single_segments(store, max_length), VOCAB)
        assert list(rows) == _reference_single(documents, max_length)


def test_sentence_order_swaps_exactly_the_labelled_pairs() -> None:
    documents = _random_documents(random.Random(5)) * 20
    examples = build_sentence_order_examples(documents, VOCAB, 32, random.Random(2))
    pairs = _reference_pairs(documents, 32, random.Random(2), 0.0, 0.1)
    rng = random.Random(2)
    _reference_pairs(documents, 32, rng, 0.0, 0.1)  # the same draws, then one swap each
    swaps = [rng.random() < 0.5 for _ in pairs]
    assert 0 < sum(swaps) < len(swaps)
    for example, pair, swapped in zip(examples, pairs, swaps, strict=True):
        a_end = pair["token_type_ids"].index(1) - 1
        a, b = pair["input_ids"][1:a_end], pair["input_ids"][a_end + 1 : -1]
        assert example["input_ids"] == _encode(*((b, a) if swapped else (a, b)))["input_ids"]
        assert example["sentence_order_label"] == int(swapped)


class CountingStore(InMemoryTokenStore):
    """Counts the token ids read: planning must read none."""

    read = 0

    def tokens(self, start: int, stop: int) -> np.ndarray:
        self.read += stop - start
        return super().tokens(start, stop)


def test_planning_reads_no_token_and_a_row_reads_only_its_own() -> None:
    documents = [[list(range(5, 5 + n)) for n in (30, 40, 50)] for _ in range(50)]
    store = CountingStore(documents)
    pairs = plan_segment_pairs(store, 64, random.Random(0))
    single = plan_single_segments(store, 64)
    assert store.read == 0
    rows = SegmentPairRows(store, pairs, VOCAB, label_key="next_sentence_label")
    row = rows[7]
    assert store.read == len(row["input_ids"]) - 3
    assert len(SegmentRows(store, single, VOCAB)) == len(single)


def test_static_data_side_depends_on_the_index_only() -> None:
    documents = [[list(range(5, 60))] for _ in range(40)]
    store = InMemoryTokenStore(documents)
    rows = SegmentRows(store, plan_single_segments(store, 32), VOCAB)

    def mask_one(example: dict[str, Any], generator: torch.Generator) -> dict[str, Any]:
        position = int(torch.randint(1, len(example["input_ids"]) - 1, (1,), generator=generator))
        return {**example, "masked": position}

    view = StaticDataSide(rows, mask_one, seed=9)
    forward = [view[i]["masked"] for i in range(len(view))]
    backward = [view[i]["masked"] for i in reversed(range(len(view)))][::-1]
    assert forward == backward
    assert len(set(forward)) > 1
    assert [r["masked"] for r in StaticDataSide(rows, mask_one, seed=10)] != forward


def test_packed_rows_equal_packing_every_row() -> None:
    rng = random.Random(4)
    documents = [[[rng.randint(5, 99) for _ in range(rng.randint(1, 40))]] for _ in range(60)]
    store = InMemoryTokenStore(documents)
    rows = SegmentRows(store, plan_single_segments(store, 48), VOCAB)
    assert list(PackedRows(rows, 48)) == pack_examples(list(rows), 48)


def test_plans_are_cached_beside_a_store_that_has_a_cache_dir(tmp_path) -> None:
    store = InMemoryTokenStore([[list(range(5, 50))] for _ in range(30)])
    store.cache_dir = tmp_path  # type: ignore[attr-defined]
    calls = []

    def plan(max_length: int) -> np.ndarray:
        def compute() -> np.ndarray:
            calls.append(max_length)
            return plan_single_segments(store, max_length)

        return cached_plan(store, "single", {"max_length": max_length}, compute)

    first, second, other = plan(16), plan(16), plan(23)
    assert len(calls) == 2 and np.array_equal(first, second) and len(other) != len(first)
    assert isinstance(second, np.memmap) and len(list(tmp_path.glob("single-*.npy"))) == 2


@pytest.mark.parametrize("workers", [1, 2])
def test_worker_processes_build_the_same_batches(workers: int) -> None:
    documents = [[list(range(5, 5 + (i % 37) + 3))] for i in range(90)]
    store = InMemoryTokenStore(documents)
    rows = SegmentRows(store, plan_single_segments(store, 24), VOCAB)

    def mask(batch: dict[str, torch.Tensor], generator: torch.Generator) -> dict:
        return {**batch, "noise": torch.rand(batch["input_ids"].shape, generator=generator)}

    inline = PretrainingBatches(rows, 8, pad_id=0, transform=mask, seed=1)
    parallel = PretrainingBatches(rows, 8, pad_id=0, transform=mask, seed=1, num_workers=workers)
    for epoch, start in ((0, 0), (1, 3)):
        a = list(inline.iter_batches(epoch, start))
        b = list(parallel.iter_batches(epoch, start))
        assert len(a) == len(b) == inline.batches_per_epoch - start
        for x, y in zip(a, b, strict=True):
            assert x.keys() == y.keys()
            assert all(torch.equal(x[k], y[k]) for k in x)


def _many_documents(count: int) -> InMemoryTokenStore:
    rng = random.Random(7)
    return InMemoryTokenStore(
        [
            [list(range(5, 5 + rng.randint(3, 30))) for _ in range(rng.randint(1, 4))]
            for _ in range(count)
        ]
    )


@pytest.mark.parametrize("kind", ["single", "nsp", "sop", "seq2seq"])
def test_chunked_plans_equal_whole_plans(
    kind: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptm_core.data import layouts
    from ptm_core.objectives.sop import iter_sentence_order
    from ptm_core.seq2seq_pretraining import iter_sentence_chunks, plan_sentence_chunks

    store = _many_documents(400)
    whole = {
        "single": lambda: plan_single_segments(store, 24),
        "nsp": lambda: plan_segment_pairs(store, 24, random.Random(3)),
        "sop": lambda: layouts.concat_plan(
            iter_sentence_order(store, 24, random.Random(3)), layouts.PAIR_COLUMNS
        ),
        "seq2seq": lambda: plan_sentence_chunks(store, 24),
    }[kind]()
    monkeypatch.setattr(layouts, "PLAN_CHUNK_ROWS", 17)  # many chunks, the last one partial
    chunked = {
        "single": lambda: layouts.iter_single_segments(store, 24),
        "nsp": lambda: layouts.iter_segment_pairs(store, 24, random.Random(3)),
        "sop": lambda: iter_sentence_order(store, 24, random.Random(3)),
        "seq2seq": lambda: iter_sentence_chunks(store, 24),
    }[kind]
    assert len(list(chunked())) > 3 or kind == "single"
    store.cache_dir = tmp_path  # type: ignore[attr-defined]
    cached = cached_plan(store, kind, {}, chunked)
    assert isinstance(cached, np.memmap) and cached.dtype == np.int64
    np.testing.assert_array_equal(cached, whole)
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_empty_store_plans_an_empty_cached_plan(tmp_path) -> None:
    from ptm_core.data import layouts

    store = InMemoryTokenStore([])
    store.cache_dir = tmp_path  # type: ignore[attr-defined]
    plan = cached_plan(store, "single", {}, lambda: layouts.iter_single_segments(store, 16))
    assert plan.shape == (0, 2)


def test_planning_into_the_cache_never_holds_the_whole_plan(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pair plans were a Python list of 7-tuples (~250 bytes a row) until the end: about
    # 5 GB for a 10 GB corpus. Now chunks of PLAN_CHUNK_ROWS go to the cache file as they come.
    import tracemalloc

    from ptm_core.data import layouts

    store = _many_documents(20_000)
    store.cache_dir = tmp_path  # type: ignore[attr-defined]
    monkeypatch.setattr(layouts, "PLAN_CHUNK_ROWS", 1024)
    tracemalloc.start()
    try:
        plan = cached_plan(
            store, "nsp", {}, lambda: layouts.iter_segment_pairs(store, 24, random.Random(0))
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(plan) > 20_000
    assert peak < plan.nbytes / 4, (peak, plan.nbytes)
