"""Featurizers, QA windows and post-processing, and the task batch source."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from ptm_core.finetune.data import (
    IGNORE_INDEX,
    ChoiceFeaturizer,
    QAAnswer,
    QAExample,
    QAFeaturizer,
    SentenceFeaturizer,
    TaggedExample,
    TaggingFeaturizer,
    TaskBatches,
    aligned_tags,
    postprocess_qa,
    read_conll,
    read_glue,
    read_squad,
    read_swag,
)
from ptm_core.tokenization import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[3] / "data_specs"
VOCAB = ROOT / "text_corpus" / "sample-vocab.txt"


@pytest.fixture(scope="module")
def tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(VOCAB)


@pytest.fixture(scope="module")
def hf_tokenizer(tokenizer: WordPieceTokenizer, tmp_path_factory: pytest.TempPathFactory):
    from transformers import BertTokenizerFast

    directory = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save(directory)
    loaded = BertTokenizerFast.from_pretrained(str(directory))
    assert loaded.vocab_size == tokenizer.vocab_size
    return loaded


# ----------------------------------------------------------------------------- sentences


def test_sentence_pairs_pad_to_the_batch_longest(tokenizer: WordPieceTokenizer) -> None:
    data = read_glue(ROOT / "glue_classification" / "train.tsv")
    rows = [data[i] for i in range(4)]
    batch = SentenceFeaturizer(tokenizer, max_length=64).featurize(rows)
    expected = [tokenizer.encode(r.text, r.pair) for r in rows]
    longest = max(len(e) for e in expected)
    assert batch["input_ids"].shape == (4, longest)
    for i, encoding in enumerate(expected):
        n = len(encoding)
        assert batch["input_ids"][i, :n].tolist() == encoding.input_ids
        assert batch["token_type_ids"][i, :n].tolist() == encoding.token_type_ids
        assert batch["attention_mask"][i].tolist() == [1] * n + [0] * (longest - n)
        assert batch["input_ids"][i, n:].eq(tokenizer.vocab_info.pad_id).all()
    assert batch["labels"].tolist() == [r.label for r in rows]
    short = SentenceFeaturizer(tokenizer, max_length=12).featurize(rows)
    assert short["input_ids"].shape == (4, 12)
    regression = SentenceFeaturizer(tokenizer, kind="regression").featurize(rows)
    assert regression["labels"].dtype == torch.float32


# ----------------------------------------------------------------------------- tagging


def test_tags_only_on_first_pieces(tokenizer: WordPieceTokenizer, hf_tokenizer) -> None:
    data = read_conll(ROOT / "conll_tagging" / "train.txt")
    rows = [data[i] for i in range(len(data))]
    featurizer = TaggingFeaturizer(tokenizer, max_length=64)
    batch = featurizer.featurize(rows)
    labels = batch["labels"]
    assert labels.shape == batch["input_ids"].shape
    split_words = 0
    for i, example in enumerate(rows):
        encoding = hf_tokenizer(example.words, is_split_into_words=True)
        ids = encoding["input_ids"]
        assert batch["input_ids"][i, : len(ids)].tolist() == ids
        # Hugging Face's tokenize_and_align_labels (label_all_tokens=False)
        expected, previous = [], None
        for word in encoding.word_ids():
            first = word is not None and word != previous
            expected.append(example.tags[word] if first else IGNORE_INDEX)  # type: ignore[index]
            previous = word
        row = labels[i].tolist()
        assert row[: len(ids)] == expected
        assert all(v == IGNORE_INDEX for v in row[len(ids) :])
        kept = [v for v in row if v != IGNORE_INDEX]
        assert kept == example.tags
        split_words += len(ids) - 2 > len(example.words)
    assert split_words > 50  # names such as "Warsaw" split into several pieces
    assert featurizer.truncated_words(rows) == 0
    refs, preds = aligned_tags(labels, labels, data.label_names)
    assert refs == preds == [[data.label_names[t] for t in e.tags or []] for e in rows]


def test_tagging_truncation_is_counted(tokenizer: WordPieceTokenizer) -> None:
    words = ["Marie", "Curie", "lived", "in", "Warsaw", "and", "Paris", "."]
    example = TaggedExample(words=words, tags=list(range(8)), line=1)
    pieces = tokenizer.backend.encode(words, is_pretokenized=True, add_special_tokens=False)
    word_ids = list(pieces.word_ids)
    featurizer = TaggingFeaturizer(tokenizer, max_length=8)  # room for 6 pieces
    kept_words = len(set(word_ids[:6]))
    batch = featurizer.featurize([example])
    assert batch["input_ids"].shape == (1, 8)
    assert batch["input_ids"][0, -1].item() == tokenizer.vocab_info.sep_id
    assert [v for v in batch["labels"][0].tolist() if v != IGNORE_INDEX] == list(range(kept_words))
    assert featurizer.truncated_words([example]) == len(words) - kept_words > 0


# ----------------------------------------------------------------------------- QA


def one_hot_logits(featurizer_rows) -> tuple[list[np.ndarray], list[np.ndarray]]:
    starts, ends = [], []
    for window in featurizer_rows:
        size = len(window.input_ids) + 3  # padding after the window is ignored
        s, e = np.zeros(size), np.zeros(size)
        s[window.start_position] = e[window.end_position] = 10.0
        starts.append(s)
        ends.append(e)
    return starts, ends


@pytest.mark.parametrize("name", ["train-v1.1.json", "dev-v1.1.json", "train-v2.0.json"])
def test_qa_round_trip_maps_every_answer_back_to_its_characters(
    tokenizer: WordPieceTokenizer, name: str
) -> None:
    examples = read_squad(ROOT / "squad_qa" / name)
    featurizer = QAFeaturizer(tokenizer, max_length=48, doc_stride=12, max_query_length=20)
    windows = featurizer.windows(examples)
    assert len(windows) > len(examples)  # long contexts were cut into several windows
    rows = list(windows)
    assert all(len(w.input_ids) <= 48 for w in rows)
    for window in rows:
        if window.start_position:
            span = window.context[
                window.offsets[window.start_position][0] : window.offsets[window.end_position][
                    1
                ]  # type: ignore[index]
            ]
            assert span == examples[window.example_index].answers[0].text
    starts, ends = one_hot_logits(rows)
    predicted = postprocess_qa(windows, starts, ends, version_2=examples.version_2)
    for example in examples:
        gold = "" if example.is_impossible else example.answers[0].text
        assert predicted[example.id] == gold, example.id
    answerable = [e for e in examples if not e.is_impossible]
    found = {w.example_index for w in rows if w.start_position}
    assert {examples.examples.index(e) for e in answerable} <= found


def test_qa_windows_cover_a_long_context_with_the_stride(tokenizer: WordPieceTokenizer) -> None:
    words = [f"w{i % 7} city{i}" for i in range(80)]
    context = " ".join(words) + " The answer is Warsaw."
    answer_start = context.index("Warsaw")
    example = QAExample(
        "long", "Where is it?", context, [QAAnswer("Warsaw", answer_start)], False, "q"
    )
    featurizer = QAFeaturizer(tokenizer, max_length=40, doc_stride=10, max_query_length=16)
    windows = featurizer.windows([example])
    rows = list(windows)
    context_tokens = len(tokenizer.backend.encode(context, add_special_tokens=False).ids)
    room = 40 - 3 - len(tokenizer.tokenize_ids("Where is it?"))
    expected = [0]
    while expected[-1] + room < context_tokens:  # the last window reaches the end
        expected.append(expected[-1] + room - 10)
    assert windows.window_start.tolist() == expected and len(expected) >= 4
    covered: set[tuple[int, int]] = set()
    for previous, current in itertools.pairwise(rows):
        shared = {o for o in previous.offsets if o} & {o for o in current.offsets if o}
        assert len(shared) == 10  # consecutive windows share doc_stride tokens
    for window in rows:
        covered |= {o for o in window.offsets if o}
        assert window.token_type_ids.count(1) == sum(o is not None for o in window.offsets) + 1
    assert len(covered) == context_tokens
    with_answer = [w for w in rows if w.start_position]
    assert len(with_answer) >= 1 and rows[0].start_position == 0
    assert all(w.input_ids[0] == tokenizer.vocab_info.cls_id for w in rows)
    assert pickle.loads(pickle.dumps(windows))[1] == rows[1]


def test_qa_windows_match_hugging_face_prepare_train_features(
    tokenizer: WordPieceTokenizer, hf_tokenizer
) -> None:
    examples = read_squad(ROOT / "squad_qa" / "train-v1.1.json")
    max_length, stride = 64, 12
    windows = list(
        QAFeaturizer(tokenizer, max_length, stride, max_query_length=24).windows(examples)
    )
    ours = [(w.input_ids, w.start_position, w.end_position) for w in windows]
    theirs = []
    for example in examples:  # run_qa.py's prepare_train_features
        encoded = hf_tokenizer(
            example.question, example.context, truncation="only_second", max_length=max_length,
            stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
        )  # fmt: skip
        start_char, end_char = example.answers[0].start, example.answers[0].end
        for i, offsets in enumerate(encoded["offset_mapping"]):
            sequence_ids = encoded.sequence_ids(i)
            first = sequence_ids.index(1)
            last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
            if not (offsets[first][0] <= start_char and offsets[last][1] >= end_char):
                span = (0, 0)
            else:
                s = first
                while s <= last and offsets[s][0] <= start_char:
                    s += 1
                e = last
                while offsets[e][1] >= end_char:
                    e -= 1
                span = (s - 1, e + 1)
            theirs.append((encoded["input_ids"][i], *span))
    assert ours == theirs


def test_qa_version_2_null_answers(tokenizer: WordPieceTokenizer) -> None:
    examples = read_squad(ROOT / "squad_qa" / "dev-v2.0.json")
    featurizer = QAFeaturizer(tokenizer, max_length=64, doc_stride=16, max_query_length=24)
    windows = featurizer.windows(examples)
    rows = list(windows)
    assert all(
        w.start_position == w.end_position == 0
        for w in rows
        if examples[w.example_index].is_impossible
    )
    starts, ends = one_hot_logits(rows)
    predicted = postprocess_qa(windows, starts, ends, version_2=True)
    assert {k for k, v in predicted.items() if v == ""} == {
        e.id for e in examples if e.is_impossible
    }
    # v1.1 post-processing never answers "": the best span wins even when [CLS] scores higher
    v1 = postprocess_qa(windows, starts, ends, version_2=False)
    assert all(v1[e.id] for e in examples)
    # the threshold: a span that scores 20 beats a null score of 20.5 only when threshold >= 0.5
    first = next(e for e in examples if not e.is_impossible)
    positions = windows.windows_of(examples.examples.index(first))
    for p in positions:
        starts[p][0] = ends[p][0] = 10.25
    assert postprocess_qa(windows, starts, ends, version_2=True)[first.id] == ""
    kept = postprocess_qa(windows, starts, ends, version_2=True, null_threshold=0.5)
    assert kept[first.id] == first.answers[0].text
    with pytest.raises(ValueError, match="one row per window"):
        postprocess_qa(windows, starts[:-1], ends, version_2=True)


def test_qa_featurizer_rejects_a_stride_that_does_not_advance(
    tokenizer: WordPieceTokenizer,
) -> None:
    with pytest.raises(ValueError, match="windows would not advance"):
        QAFeaturizer(tokenizer, max_length=64, doc_stride=40, max_query_length=24)


# ----------------------------------------------------------------------------- multiple choice


def test_multiple_choice_batch_shape(tokenizer: WordPieceTokenizer) -> None:
    data = read_swag(ROOT / "multiple_choice" / "train.csv")
    rows = [data[i] for i in range(3)]
    batch = ChoiceFeaturizer(tokenizer, max_length=40).featurize(rows)
    assert batch["input_ids"].shape[:2] == (3, 4) and batch["input_ids"].shape[2] <= 40
    assert batch["labels"].tolist() == [r.label for r in rows]
    second = tokenizer.encode(rows[1].context, f"{rows[1].start} {rows[1].endings[2]}")
    n = len(second)
    assert batch["input_ids"][1, 2, :n].tolist() == second.input_ids
    assert batch["token_type_ids"][1, 2, :n].tolist() == second.token_type_ids
    assert batch["attention_mask"][1, 2].sum().item() == n


# ----------------------------------------------------------------------------- batches


def test_task_batches_are_deterministic_and_resumable(tokenizer: WordPieceTokenizer) -> None:
    data = read_glue(ROOT / "glue_classification" / "train.tsv")
    featurizer = SentenceFeaturizer(tokenizer, max_length=64)

    def source() -> TaskBatches:
        return TaskBatches(data, featurizer, batch_size=8, seed=3)

    batches = source()
    assert batches.batches_per_epoch == -(-len(data) // 8)
    epoch0 = list(batches.iter_batches(0))
    again = list(source().iter_batches(0))
    assert all(
        torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(epoch0, again, strict=True)
    )
    epoch1 = list(batches.iter_batches(1))
    assert any(not torch.equal(a["labels"], b["labels"]) or a["input_ids"].shape != b["input_ids"].shape
               or not torch.equal(a["input_ids"], b["input_ids"]) for a, b in zip(epoch0, epoch1, strict=True))  # fmt: skip
    orders = [batches.order(e)[:].tolist() for e in (0, 1)]  # type: ignore[union-attr]
    assert orders[0] != orders[1] and sorted(orders[0]) == list(range(len(data)))
    tail = list(batches.iter_batches(0, start=3))
    assert len(tail) == len(epoch0) - 3
    for a, b in zip(tail, epoch0[3:], strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    for batch, index in zip(epoch0, range(len(epoch0)), strict=True):
        lengths = batch["attention_mask"].sum(1)
        assert batch["input_ids"].shape[1] == lengths.max().item()  # padded to its own longest
        chosen = batches.indices(0, index)
        assert batch["labels"].tolist() == [data[i].label for i in chosen]
    dropped = TaskBatches(data, featurizer, batch_size=8, drop_last=True)
    assert dropped.batches_per_epoch == len(data) // 8


def test_task_batches_for_qa_evaluation_carry_feature_index(tokenizer: WordPieceTokenizer) -> None:
    examples = read_squad(ROOT / "squad_qa" / "dev-v1.1.json")
    featurizer = QAFeaturizer(tokenizer, max_length=48, doc_stride=12, max_query_length=20)
    windows = featurizer.windows(examples)
    batches = TaskBatches(windows, featurizer, batch_size=5, shuffle=False, feature_index=True)
    seen: list[int] = []
    starts: dict[int, np.ndarray] = {}
    ends: dict[int, np.ndarray] = {}
    for batch in batches.iter_batches(0):
        seen += batch["feature_index"].tolist()
        # a model that predicts the gold positions, in padded (B, L) logits
        logits = torch.zeros(*batch["input_ids"].shape, 2)
        rows = torch.arange(len(logits))
        logits[rows, batch["start_positions"], 0] = 10.0
        logits[rows, batch["end_positions"], 1] = 10.0
        for row, feature in enumerate(batch["feature_index"].tolist()):
            starts[feature], ends[feature] = logits[row, :, 0], logits[row, :, 1]
    assert seen == list(range(len(windows)))
    predicted = postprocess_qa(
        windows, [starts[i] for i in seen], [ends[i] for i in seen], version_2=False
    )
    assert predicted == {e.id: e.answers[0].text for e in examples}
    train = TaskBatches(windows, featurizer, batch_size=5, seed=1)
    assert "feature_index" not in next(train.iter_batches(0))


def test_task_batches_built_in_workers_equal_the_in_process_ones(
    tokenizer: WordPieceTokenizer,
) -> None:
    data = read_conll(ROOT / "conll_tagging" / "train.txt")
    featurizer = TaggingFeaturizer(tokenizer, max_length=32)
    here = list(TaskBatches(data, featurizer, 16, seed=5).iter_batches(2, start=1))
    workers = list(
        TaskBatches(data, featurizer, 16, seed=5, num_workers=2).iter_batches(2, start=1)
    )
    assert len(here) == len(workers) == -(-len(data) // 16) - 1
    for a, b in zip(here, workers, strict=True):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_postprocess_finds_the_best_valid_span(tokenizer: WordPieceTokenizer) -> None:
    examples = read_squad(ROOT / "squad_qa" / "dev-v1.1.json")
    featurizer = QAFeaturizer(tokenizer, max_length=48, doc_stride=12, max_query_length=20)
    windows = featurizer.windows(examples)
    rows = list(windows)
    rng = np.random.default_rng(0)
    starts = [rng.normal(size=len(w.input_ids)) for w in rows]
    ends = [rng.normal(size=len(w.input_ids)) for w in rows]
    longest = 4
    # with n_best covering every token, the n-best search is exhaustive
    predicted = postprocess_qa(windows, starts, ends, n_best=48, max_answer_length=longest)
    for index, example in enumerate(examples):
        best, text = -np.inf, ""
        for p in windows.windows_of(index):
            offsets = rows[p].offsets
            for s, start_span in enumerate(offsets):
                for e, end_span in enumerate(offsets):
                    valid = start_span is not None and end_span is not None
                    if valid and s <= e < s + longest and starts[p][s] + ends[p][e] > best:
                        best = starts[p][s] + ends[p][e]
                        text = example.context[start_span[0] : end_span[1]]  # type: ignore[index]
        assert predicted[example.id] == text
        assert text and text in example.context
    narrow = postprocess_qa(windows, starts, ends, n_best=2, max_answer_length=1)
    assert all(len(tokenizer.tokenize_ids(answer)) <= 1 for answer in narrow.values() if answer)
