"""K-BERT reads its inputs lazily: TSV rows by byte offset, examples featurized per batch,
knowledge from a compact index that answers like the dict it replaces."""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_knowledge.kbert import (
    KBertKnowledge,
    LazyTsv,
    build_sentence_tree,
    knowledge_from_graph,
    pair_words,
    read_labeled_tsv,
    read_tagged_tsv,
)
from ptm_knowledge.kbert.model import segment_words


def _write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_labeled_rows_are_parsed_per_index_from_offsets(tmp_path: Path) -> None:
    lines = ["label\ttext_a\ttext_b"] + [
        f"{'pos' if i % 3 else 'neg'}\tSentence número {i} , é.\tSecond {i}." for i in range(50)
    ]
    path = _write(tmp_path / "train.tsv", "\ufeff" + "\r\n".join(lines) + "\r\n# end\n")
    examples, labels = read_labeled_tsv(path)
    assert isinstance(examples, LazyTsv) and len(examples) == 50 and labels == ["neg", "pos"]
    assert examples.offsets.dtype.name == "int64" and examples.lines[0] == 2
    for i in (49, 0, 17, -1):  # any order: a seek per row
        row = i % 50
        got = examples[i]
        assert got.words == segment_words(f"Sentence número {row} , é.")
        assert got.second == segment_words(f"Second {row}.")
        assert got.label == (1 if row % 3 else 0)
    again = pickle.loads(pickle.dumps(examples))  # DataLoader workers reopen the file
    assert [e.label for e in again] == [e.label for e in examples]
    with pytest.raises(IndexError):
        examples[50]


def test_tagged_sentences_are_parsed_per_index(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "ner.tsv",
        "Paris\tB-LOC\nis\tO\n\n# comment\n\nWarsaw\tB-LOC\n# inside\nrains\tO\n.\tO\n",
    )
    sentences, tags = read_tagged_tsv(path)
    assert tags == ["B-LOC", "O"] and len(sentences) == 2
    assert sentences[1].words == ["Warsaw", "rains", "."] and sentences[1].tags == [0, 1, 1]
    assert sentences[0].words == ["Paris", "is"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"pos\tfine\nneg\tfine\npos\ttoo\tmany\tcolumns\n", r"train\.tsv:3: expected label<TAB>"),
        (b"pos\tfine\n\n\nneg\tbad \xff byte\n", r"train\.tsv:4: not valid UTF-8"),
        (b"pos\tfine\n\tno label\n", r"train\.tsv:2: empty label"),
    ],
)
def test_a_bad_line_fails_with_file_and_line(tmp_path: Path, content: bytes, expected: str):
    with pytest.raises(ValueError, match=expected):
        read_labeled_tsv(_write(tmp_path / "train.tsv", content))


def test_a_bad_tagged_line_fails_with_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "ner.tsv", b"Paris\tB-LOC\n\nWarsaw\tB-LOC\nno tab here\n")
    with pytest.raises(ValueError, match=r"ner\.tsv:4: expected word<TAB>tag"):
        read_tagged_tsv(path)


def test_batches_featurize_only_the_rows_they_hold() -> None:
    calls: list[int] = []

    class Recording:
        def featurize(self, rows: list[int]) -> dict:
            calls.extend(rows)
            return {"x": list(rows)}

    # Without the prefetch thread, which builds up to two batches ahead on purpose.
    batches = TaskBatches(list(range(10)), Recording(), 4, seed=1, prefetch=False)  # type: ignore[arg-type]
    first = next(batches.iter_batches(0))
    assert len(first["x"]) == 4 and sorted(calls) == sorted(first["x"])
    assert [len(b["x"]) for b in batches.iter_batches(0, start=1)] == [4, 2]


def _dict_table(kg, *, predicate: bool, aliases: bool) -> dict[str, list[str]]:
    """The dict-of-lists table K-BERT used before (and the reference code's shape)."""
    objects: dict[str, list[str]] = {}
    for triple in kg.triples:
        tail = kg[triple.tail].name
        text = f"{triple.relation.replace('_', ' ')} {tail}" if predicate else tail
        objects.setdefault(triple.head, []).append(text)
    table: dict[str, list[str]] = {}
    for entity in kg.entities:
        if entity.id in objects:
            for surface in entity.surface_forms if aliases else (entity.name,):
                merged = table.setdefault(surface, [])
                merged += [o for o in objects[entity.id] if o not in merged]
    return table


@pytest.mark.parametrize("aliases", [False, True])
@pytest.mark.parametrize("predicate", [True, False])
def test_compact_knowledge_answers_like_the_dict(sample_kg, predicate: bool, aliases: bool):
    table = _dict_table(sample_kg, predicate=predicate, aliases=aliases)
    index = knowledge_from_graph(sample_kg, predicate=predicate, aliases=aliases)
    assert isinstance(index, KBertKnowledge) and set(index) == set(table)
    for surface, objects in table.items():
        # The dict kept an entity's repeated objects (a tail reached by two relations with
        # predicate=false) despite its docstring; the index drops repeats as documented.
        objects = list(dict.fromkeys(objects))
        assert index[surface] == objects
        assert index.get(surface) == objects
    assert "no such entity" not in index and index.get("no such entity") is None
    assert index.max_subject_words == max(len(k.split(" ")) for k in table)
    first = next(iter(table))
    assert pickle.loads(pickle.dumps(index))[first] == index[first]


class _NoScan(Mapping[str, list[str]]):
    """A table that refuses to be scanned: lookups only."""

    def __init__(self, inner: KBertKnowledge) -> None:
        self.inner, self.max_subject_words = inner, inner.max_subject_words

    def __getitem__(self, key: str) -> list[str]:
        return self.inner[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the sentence tree scanned the whole knowledge table")

    def __len__(self) -> int:
        raise AssertionError("the sentence tree sized the whole knowledge table")


def test_sentence_tree_looks_subjects_up_without_scanning_the_table(sample_kg) -> None:
    index = knowledge_from_graph(sample_kg)
    table = _dict_table(sample_kg, predicate=True, aliases=False)
    subject = next(k for k in table if " " in k)
    words = pair_words(["I", "saw", *subject.split(" "), "today"])
    split = lambda s: s.split(" ")  # noqa: E731
    expected = build_sentence_tree(words, table, max_entities=2, max_length=64, split=split)
    got = build_sentence_tree(words, _NoScan(index), max_entities=2, max_length=64, split=split)
    assert got.tokens == expected.tokens and got.num_dropped_branches == 0
    assert (got.visible_matrix == expected.visible_matrix).all()
    assert any(got.is_knowledge.tolist())
