"""Reliability of the ptm-knowledge readers: line splitting, encodings, empty and bad data.

Every error must name the file, the 1-based line and the field, and say the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from knowledge_sample_paths import ROOT

from ptm_knowledge.cogqa.data import read_hotpot_json, write_hotpot_json
from ptm_knowledge.cogqa.evaluation import evaluate_predictions
from ptm_knowledge.cogqa.examples import MultiHopDataError
from ptm_knowledge.cogqa.training import fit_system
from ptm_knowledge.kbert import finetune_kbert, read_labeled_tsv, read_tagged_tsv
from ptm_knowledge.kg import KGError, read_entity_table, read_triples
from ptm_knowledge.linking import LinkedCorpusError, read_linked_corpus
from ptm_knowledge.linking.corpus import (
    LinkedDocument,
    SentenceMention,
    link_corpus_with_kg,
    write_linked_corpus,
)

HEADER = "id\tname\ttype\taliases\tdescription\n"
HOTPOT_SAMPLE = ROOT / "data_specs" / "multihop_qa" / "sample" / "bridge_sample.json"
LS, PS = "\u2028", "\u2029"


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


# ------------------------------------------------ U+2028 / U+2029 (lines split on \n only)


def test_linked_corpus_round_trip_keeps_u2028_and_u2029(tmp_path: Path) -> None:
    sentence = f"Vienna{LS}lies on the Danube.{PS}Really."
    docs = [
        LinkedDocument(
            "d1",
            [sentence, "Second sentence."],
            [SentenceMention(0, 0, 6, "vienna", 0.9), SentenceMention(0, 20, 26, "danube")],
        ),
        LinkedDocument("d2", [f"Only{LS}one."]),
    ]
    path = write_linked_corpus(docs, tmp_path / "linked.jsonl")
    raw = path.read_bytes()
    assert raw.count(b"\n") == 2  # one record per line
    assert LS.encode() not in raw and PS.encode() not in raw  # written as JSON escapes
    back = read_linked_corpus(path, ["vienna", "danube"])
    assert [d.doc_id for d in back] == ["d1", "d2"]
    assert back[0].sentences == [sentence, "Second sentence."]
    assert back[0].sentence_mentions(0) == [(0, 6, "vienna"), (20, 26, "danube")]
    assert back[1].sentences == [f"Only{LS}one."]


def test_linked_corpus_reader_accepts_raw_u2028_in_a_record(tmp_path: Path) -> None:
    # Files written by older versions (or other tools) hold the characters raw.
    record = {"id": "a", "sentences": [f"x{LS}y{PS}z", "ok"], "mentions": []}
    line = json.dumps(record, ensure_ascii=False)
    path = _write(tmp_path / "c.jsonl", line + "\n" + line.replace('"a"', '"a"x') + "\n")
    with pytest.raises(LinkedCorpusError) as err:
        read_linked_corpus(path)
    assert (err.value.line, err.value.field) == (2, "json")
    path = _write(tmp_path / "c.jsonl", line + "\n")
    assert read_linked_corpus(path)[0].sentences == [f"x{LS}y{PS}z", "ok"]


def test_link_corpus_on_a_sentence_with_u2028_reads_back(tmp_path: Path) -> None:
    kg = tmp_path / "kg"
    kg.mkdir()
    _write(kg / "entities.tsv", HEADER + "vienna\tVienna\tcity\t\tCapital of Austria.\n")
    corpus = _write(tmp_path / "corpus.txt", f"They moved to Vienna{LS}in 1891.\nThen home.\n")
    out = link_corpus_with_kg(corpus, kg, tmp_path / "linked.jsonl")
    docs = read_linked_corpus(out, ["vienna"])
    assert docs[0].sentences == [f"They moved to Vienna{LS}in 1891.", "Then home."]
    assert docs[0].sentence_mentions(0) == [(14, 20, "vienna")]


def test_entity_table_line_numbers_after_a_u2028_cell(tmp_path: Path) -> None:
    # splitlines() would cut line 2 in two and report the bad id of line 4 as line 5.
    body = f"a\tA\t\t\tFirst{LS}line of a description.\nb\tB\t\t\t\nc d\tC\t\t\t\n"
    path = _write(tmp_path / "entities.tsv", HEADER + body)
    with pytest.raises(KGError) as err:
        read_entity_table(path)
    assert (err.value.line, err.value.field) == (4, "id")
    assert str(err.value).startswith(f"{path}:4: bad entity id 'c d'")
    path = _write(tmp_path / "entities.tsv", HEADER + body.rsplit("c d", 1)[0])
    assert read_entity_table(path)[0].description == f"First{LS}line of a description."


def test_kbert_tsv_line_numbers_after_a_u2028_cell(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "train.tsv",
        f"label\ttext_a\npos\tgood{LS}text\npos\ttwo\nneg\ta\tb\tc\n",
    )
    with pytest.raises(ValueError, match=r"train\.tsv:4: expected label<TAB>text_a") as err:
        read_labeled_tsv(path)
    assert "got 4 fields" in str(err.value)


# ------------------------------------------------ K-BERT: BOM, empty labels, empty files


def test_kbert_bom_does_not_make_a_class(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "\ufeffpos\tGood film.\nneg\tBad film.\n")
    examples, labels = read_labeled_tsv(path)
    assert labels == ["neg", "pos"]
    assert [e.label for e in examples] == [1, 0]
    with_header = _write(tmp_path / "h.tsv", "\ufefflabel\ttext_a\npos\tGood film.\n")
    assert read_labeled_tsv(with_header)[1] == ["pos"]


def test_kbert_empty_label_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "label\ttext_a\npos\tGood.\n\tNo label here.\n")
    with pytest.raises(ValueError) as err:
        read_labeled_tsv(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: empty label (field 'label'); "), message
    tagged = _write(tmp_path / "ner.tsv", "Paris\tB-LOC\nis\t\n")
    with pytest.raises(ValueError, match=r"ner\.tsv:2: empty tag \(field 'tag'\)"):
        read_tagged_tsv(tagged)


@pytest.mark.parametrize("content", ["", "label\ttext_a\n", "# only a comment\n\n"])
def test_empty_kbert_train_file_is_blamed_on_itself(tmp_path: Path, content: str) -> None:
    train = _write(tmp_path / "train.tsv", content)
    with pytest.raises(ValueError) as err:
        read_labeled_tsv(train)
    message = str(err.value)
    assert message.startswith(f"{train}: no labelled sentences in the file"), message
    assert "dev.tsv" not in message
    if not content.startswith("label"):  # a word<TAB>tag line for the tagged reader
        with pytest.raises(ValueError, match=r"ner\.tsv: no tagged sentences"):
            read_tagged_tsv(_write(tmp_path / "ner.tsv", content))


def test_finetune_kbert_refuses_empty_sets() -> None:
    with pytest.raises(ValueError, match="no train examples"):
        finetune_kbert(
            [],
            [],
            encoder=None,  # type: ignore[arg-type]
            tokenizer=None,
            knowledge={},
            label_names=[],
            trainer=None,  # type: ignore[arg-type]
        )


def test_kbert_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", b"pos\tGood.\nneg\tBad \xe9 film.\n")
    with pytest.raises(ValueError) as err:
        read_labeled_tsv(path)
    assert not isinstance(err.value, UnicodeDecodeError)
    message = str(err.value)
    assert message.startswith(f"{path}:2: not valid UTF-8"), message
    assert "(field 'encoding')" in message and "re-encode the file as UTF-8" in message


# ------------------------------------------------ linked corpus: encoding, NUL, score


def test_linked_corpus_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    good = '{"id": "a", "sentences": ["Vienna."], "mentions": []}\n'
    path = _write(tmp_path / "c.jsonl", good.encode() + b'{"id": "b", "sentences": ["\xff"]}\n')
    with pytest.raises(LinkedCorpusError) as err:
        read_linked_corpus(path)
    assert (err.value.line, err.value.field) == (2, "encoding")
    assert str(err.value).startswith(f"{path}:2: not valid UTF-8")
    assert "re-encode the file as UTF-8" in str(err.value)


def test_linked_sentence_with_nul_is_rejected(tmp_path: Path) -> None:
    record = {"id": "a", "sentences": ["fine", "bro\u0000ken"], "mentions": []}
    path = _write(tmp_path / "c.jsonl", "\n" + json.dumps(record) + "\n")
    with pytest.raises(LinkedCorpusError) as err:
        read_linked_corpus(path)
    assert (err.value.line, err.value.field) == (2, "sentences[1]")
    assert "NUL character" in str(err.value)


@pytest.mark.parametrize("score", [1.5, -0.01, "0.9", True])
def test_linked_score_outside_unit_interval_is_rejected(tmp_path: Path, score: object) -> None:
    mention = {"sentence": 0, "start": 0, "end": 6, "entity": "vienna", "score": score}
    record = {"id": "a", "sentences": ["Vienna."], "mentions": [mention]}
    path = _write(tmp_path / "c.jsonl", json.dumps(record) + "\n")
    with pytest.raises(LinkedCorpusError) as err:
        read_linked_corpus(path)
    assert (err.value.line, err.value.field) == (1, "mentions[0].score")
    assert str(err.value).startswith(f"{path}:1: score {score!r} is not a number in [0, 1]")


def test_linked_score_bounds_are_accepted(tmp_path: Path) -> None:
    mentions = [
        {"sentence": 0, "start": 0, "end": 1, "entity": "a", "score": 0},
        {"sentence": 0, "start": 2, "end": 3, "entity": "b", "score": 1.0},
    ]
    path = _write(
        tmp_path / "c.jsonl", json.dumps({"id": "x", "sentences": ["a b"], "mentions": mentions})
    )
    assert [m.score for m in read_linked_corpus(path)[0].mentions] == [0, 1.0]


# ------------------------------------------------ KG: NUL in names and aliases


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("b\tBro\x00ken\t\t\t\n", "name"),
        ("b\tB\t\tgood|al\x00ias\t\n", "aliases"),
        ("b\x00\tB\t\t\t\n", "id"),
    ],
)
def test_nul_in_entity_table_is_rejected(tmp_path: Path, row: str, field: str) -> None:
    path = _write(tmp_path / "entities.tsv", HEADER + "a\tA\t\t\t\n" + row)
    with pytest.raises(KGError) as err:
        read_entity_table(path)
    assert (err.value.line, err.value.field) == (3, field)
    assert str(err.value).startswith(f"{path}:3: NUL character")


def test_nul_in_triples_is_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path / "triples.tsv", "a\tknows\tb\na\tkno\x00ws\tb\n")
    with pytest.raises(KGError) as err:
        read_triples(path, {"a", "b"})
    assert (err.value.line, err.value.field) == (2, "relation")


# ------------------------------------------------ CogQA: empty sets, encoding, duplicate ids


@pytest.mark.parametrize("content", ["[]", "[\n]\n"])
def test_empty_hotpot_file_is_an_error(tmp_path: Path, content: str) -> None:
    path = _write(tmp_path / "train.json", content)
    with pytest.raises(MultiHopDataError) as err:
        read_hotpot_json(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line 1: field '<root>': the list holds no records")


def test_cogqa_entry_point_refuses_an_empty_train_or_dev_file(tmp_path: Path) -> None:
    from ptm_knowledge.cogqa.run import load_questions
    from ptm_knowledge.cogqa_settings import MultiHopData

    empty = _write(tmp_path / "empty.json", "[]\n")
    for split in ("train_file", "dev_file"):
        other = "dev_file" if split == "train_file" else "train_file"
        data = MultiHopData(
            corpus=str(HOTPOT_SAMPLE), **{split: str(empty), other: str(HOTPOT_SAMPLE)}
        )
        with pytest.raises(MultiHopDataError, match=rf"^{empty}: line 1: .*no records"):
            load_questions(data)


def test_cogqa_training_and_evaluation_refuse_empty_sets() -> None:
    with pytest.raises(ValueError, match="no CogQA training questions"):
        fit_system([])
    with pytest.raises(ValueError, match="evaluate_predictions: no examples"):
        evaluate_predictions([], {})


def test_hotpot_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    data = HOTPOT_SAMPLE.read_bytes()
    second = data.index(b"\n", data.index(b"\n") + 1)  # end of line 2
    path = _write(tmp_path / "dev.json", data[: second + 1] + b'"\xff' + data[second + 2 :])
    with pytest.raises(MultiHopDataError) as err:
        read_hotpot_json(path)
    message = str(err.value)
    assert message.startswith(f"{path}:3: field 'encoding': not valid UTF-8"), message
    assert f"byte offset {second + 2}" in message and "re-encode the file as UTF-8" in message


def test_duplicate_hotpot_id_names_both_records(tmp_path: Path) -> None:
    examples = read_hotpot_json(HOTPOT_SAMPLE)[:3]
    path = write_hotpot_json([*examples, examples[1]], tmp_path / "train.json")
    with pytest.raises(MultiHopDataError) as err:
        read_hotpot_json(path)
    message = str(err.value)
    dup = examples[1].id
    assert message.startswith(f"{path}: line 5 (record 3, _id {dup!r}): field '_id'"), message
    assert f"first used at line 3 (record 1, _id {dup!r})" in message
