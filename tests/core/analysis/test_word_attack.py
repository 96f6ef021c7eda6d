"""The word-substitution attack (ptm_core.analysis.attack, `ptm analyze MODEL attack`) on a
tiny classifier ptm fine-tunes here on a generated sentiment task, and on a random Hugging
Face classifier: a budget of 0 changes nothing, the attack lowers accuracy, the budget is
never exceeded, candidates are the table's nearest neighbours, bad files name file and line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from attack_fixtures import (
    finetuned_classifier,
    hf_classifier,
    hf_masked_lm,
    sentiment_table,
    write_task,
)

from ptm_core.analysis import load_masked_language_model
from ptm_core.analysis.attack import run_attack, word_limit
from ptm_core.analysis.attack_candidates import EmbeddingCandidates, MaskedLMCandidates
from ptm_core.analysis.attack_classifier import ClassifierError, load_sequence_classifier
from ptm_core.analysis.attack_words import (
    STOP_WORDS,
    WORD,
    match_case,
    with_words,
    word_spans,
)
from ptm_core.data.errors import DataError
from ptm_core.data.vector_table import VectorTable, VectorTableError


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attack")


@pytest.fixture(scope="module")
def finetuned(root: Path) -> Path:
    return finetuned_classifier(root / "ptm", steps=60)


@pytest.fixture(scope="module")
def dev(root: Path) -> Path:
    return write_task(root / "attack-dev.tsv", 40, seed=7)


@pytest.fixture(scope="module")
def table() -> EmbeddingCandidates:
    return EmbeddingCandidates(sentiment_table(), k=5, min_similarity=0.3)


def test_words_spans_deletion_and_case() -> None:
    text = "The well-made film wasn't GOOD, really."
    assert [s.text for s in word_spans(text)] == [
        "The",
        "well-made",
        "film",
        "wasn't",
        "GOOD",
        "really",
    ]
    spans = word_spans(text)
    assert with_words(text, spans, {2: ""}) == "The well-made wasn't GOOD, really."
    assert with_words(text, spans, {4: "FINE", 5: ""}) == "The well-made film wasn't FINE,."
    assert match_case("fine", "Good") == "Fine" and match_case("fine", "GOOD") == "FINE"


def test_candidates_are_the_tables_nearest_neighbours() -> None:
    words = ["good", "great", "nice", "the", "bad", "fair"]
    vectors = torch.tensor(
        [[1.0, 0.0], [0.95, 0.2], [0.7, 0.7], [1.0, 0.01], [-1.0, 0.0], [0.6, 0.8]]
    )
    hand = VectorTable(words, vectors, "hand")
    unit = vectors / vectors.norm(dim=1, keepdim=True)
    cosine = {w: float(unit[0] @ unit[i]) for i, w in enumerate(words)}
    # brute force: every other word, nearest first, stop words out, above the threshold
    expected = [
        w
        for w in sorted(words, key=cosine.__getitem__, reverse=True)
        if w not in ("good", "the") and cosine[w] >= 0.5
    ]
    assert expected == ["great", "nice", "fair"]
    spans = word_spans("A Good film")
    assert EmbeddingCandidates(hand, k=10, min_similarity=0.5)("A Good film", spans, 1) == [
        "Great",
        "Nice",
        "Fair",  # the case of the word they replace
    ]
    assert EmbeddingCandidates(hand, k=2, min_similarity=0.5)("x", word_spans("good"), 0) == [
        "great",
        "nice",
    ]
    assert EmbeddingCandidates(hand, k=10, min_similarity=0.9)("x", word_spans("good"), 0) == [
        "great"
    ]
    assert EmbeddingCandidates(hand)("x", word_spans("unknown"), 0) == []


def test_masked_lm_candidates_are_whole_words(root: Path) -> None:
    source = MaskedLMCandidates(load_masked_language_model(hf_masked_lm(root)), k=8)
    text = "The movie was Good ."
    found = source(text, word_spans(text), 3)
    assert 0 < len(found) <= 8
    for word in found:
        assert WORD.fullmatch(word) and word.lower() not in STOP_WORDS
        assert word[0].isupper() and word.lower() != "good"


def test_masked_lm_candidates_filtered_by_a_table(root: Path) -> None:
    model = load_masked_language_model(hf_masked_lm(root / "filtered"))
    table = EmbeddingCandidates(sentiment_table(), min_similarity=0.9)
    text = "The movie was Good ."
    plain = MaskedLMCandidates(model, k=100)(text, word_spans(text), 3)
    kept = MaskedLMCandidates(model, k=100, similar_in=table)(text, word_spans(text), 3)
    expected = [w for w in plain if (table.similarity(w, "good") or -1.0) >= 0.9]
    assert kept == expected and 0 < len(kept) < len(plain)  # in the MLM's order


def test_masked_lm_candidates_of_a_byte_level_bpe_model(tmp_path: Path) -> None:
    from hf_folders import roberta_folder

    model = load_masked_language_model(roberta_folder(tmp_path, "roberta"))
    source = MaskedLMCandidates(model, k=1000)  # every word-start token of the vocabulary
    backend = model.tokenizer.backend  # type: ignore[attr-defined]
    vocab = backend.get_vocab().items()
    starts = {backend.decode([i]).strip() for t, i in vocab if t[0] in "Ġ▁" and len(t) > 1}
    text = "Zürich garden river stone"
    found = source(text, word_spans(text), 2)
    assert found and "river" not in [w.lower() for w in found]
    assert set(found) <= starts  # tokens that start a word, decoded: no inner pieces
    assert "café" in found and not any("Ã" in w or "Ġ" in w for w in found)  # bytes decoded
    assert all(WORD.fullmatch(w) and w.lower() not in STOP_WORDS for w in found)


@pytest.mark.parametrize("kind", ["ptm", "hf"])
def test_budget_zero_changes_nothing(
    kind: str, root: Path, finetuned: Path, dev: Path, table
) -> None:
    folder = finetuned if kind == "ptm" else hf_classifier(root / "zero")
    classifier = load_sequence_classifier(folder)
    examples = classifier.read(dev)
    traces, summaries = run_attack(classifier, table, examples, [0.0])
    summary = summaries[0.0]
    assert summary["attacked_accuracy"] == summary["clean_accuracy"]
    assert summary["succeeded"] == 0 and summary["queries_per_example"] == 1
    for trace in traces:
        outcome = trace.at(0)
        assert outcome["changed"] == [] and outcome["adversarial"] == trace.example.text
        assert trace.queries == 1  # nothing but the clean prediction
    assert classifier.queries == len(examples)


def test_attack_lowers_a_trained_classifiers_accuracy(finetuned: Path, dev: Path, table) -> None:
    classifier = load_sequence_classifier(finetuned)
    _traces, summaries = run_attack(classifier, table, classifier.read(dev), [0.3])
    summary = summaries[0.3]
    assert summary["clean_accuracy"] >= 0.9
    # one swapped adjective flips it: far below clean accuracy
    assert summary["attacked_accuracy"] <= summary["clean_accuracy"] - 0.5
    assert summary["success_rate"] >= 0.5 and summary["perturbed_share"] > 0


def test_budgets_are_kept_and_match_separate_runs(finetuned: Path, dev: Path, table) -> None:
    classifier = load_sequence_classifier(finetuned)
    examples = classifier.read(dev)
    budgets = [0.1, 0.2, 0.25, 0.5]
    traces, summaries = run_attack(classifier, table, examples, budgets, max_words=2)
    for share in budgets:
        for trace in traces:
            outcome = trace.at(word_limit(share, len(trace.spans), 2))
            assert len(outcome["changed"]) <= min(math.floor(share * len(trace.spans)), 2)
            assert outcome["perturbed_share"] <= share
        alone_traces, alone = run_attack(classifier, table, examples, [share], max_words=2)
        assert alone[share] == summaries[share]  # one run with the largest budget, cut
        assert [t.at(99) for t in alone_traces] == [
            t.at(word_limit(share, len(t.spans), 2)) for t in traces
        ]


def test_bad_inputs_get_one_line(tmp_path: Path, finetuned: Path, dev: Path, capsys) -> None:
    from flows.cli import main

    classifier = load_sequence_classifier(finetuned)
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence\tlabel\nthe film was good .\tpos\nthe film was bad .\tmeh\n")
    with pytest.raises(DataError, match=r"bad\.tsv:3: .*'meh'"):
        classifier.read(bad)
    (tmp_path / "nolabel.tsv").write_text("sentence\tscore\na film .\t1\n")
    with pytest.raises(DataError, match=r"nolabel\.tsv:1: .*label"):
        classifier.read(tmp_path / "nolabel.tsv")
    with pytest.raises(VectorTableError, match=r"nowhere: no vector table"):
        EmbeddingCandidates(tmp_path / "nowhere")
    with pytest.raises(ClassifierError, match=r"has no task\.json nor config\.json"):
        load_sequence_classifier(tmp_path)
    table_dir = tmp_path / "table"
    sentiment_table().save(table_dir)
    base = ["analyze", str(finetuned), "attack", "--data", str(bad), "--output"]
    assert main([*base, str(tmp_path / "o1"), "--embeddings", str(table_dir)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.tsv:3" in err[0] and err[0].startswith("ptm: ")
    assert main([*base, str(tmp_path / "o2")]) == 1
    assert "--embeddings TABLE" in capsys.readouterr().err
    assert (
        main(
            [*base, str(tmp_path / "o3"), "--embeddings", str(table_dir), "--max-perturbed", "1.5"]
        )
        == 1
    )
    assert "[0, 1]" in capsys.readouterr().err
    assert main([*base, str(tmp_path / "o4"), "--embeddings", str(table_dir), "--mlm-filter"]) == 1
    assert "give both --mlm FOLDER and --embeddings TABLE" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in ("o1", "o2", "o3", "o4"))


def test_cli_writes_the_report_and_the_flow_runs_it(
    tmp_path: Path, finetuned: Path, dev: Path, root: Path
) -> None:
    from flows.analyze_flow import analyze
    from flows.cli import main

    table_dir = tmp_path / "table"
    sentiment_table().save(table_dir)
    out = tmp_path / "report"
    args = ["analyze", str(finetuned), "attack", "--data", str(dev), "--output", str(out)]
    args += ["--embeddings", str(table_dir), "--mlm", str(hf_masked_lm(tmp_path)), "--mlm-filter"]
    args += ["--min-similarity", "0.3", "--candidates", "5", "--budgets", "0,0.1,0.3"]
    assert main(args) == 0
    record = json.loads((out / "attack.json").read_text())
    assert set(record["sources"]) == {"embeddings", "mlm", "mlm-filtered"}
    assert list(record["sources"]["embeddings"]["budgets"]) == ["0", "0.1", "0.2", "0.3"]
    zero = record["sources"]["embeddings"]["budgets"]["0"]
    assert zero["attacked_accuracy"] == zero["clean_accuracy"]
    markdown = (out / "attack.md").read_text()
    assert "~~" in markdown and "](attack.png)" in markdown
    assert (out / "attack.png").read_bytes()[:4] == b"\x89PNG"
    assert main(args) == 1  # an earlier analysis is replaced only with --overwrite
    result = analyze.fn(
        str(finetuned),
        probe="attack",
        data=str(dev),
        output=str(tmp_path / "flow"),
        embeddings=str(table_dir),
        max_perturbed=0.0,
    )
    assert result["sources"]["embeddings"]["0"]["succeeded"] == 0
    examples = json.loads((tmp_path / "flow" / "attack.json").read_text())["sources"]
    assert all(e["adversarial"] == e["original"] for e in examples["embeddings"]["examples"])
