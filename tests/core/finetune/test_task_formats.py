"""Readers of the downstream task formats: the samples parse, broken files fail at file:line:field."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from ptm_core.data.errors import DataError
from ptm_core.finetune.data import (
    ChoiceExample,
    QAExample,
    SentenceExample,
    TaggedExample,
    read_conll,
    read_glue,
    read_squad,
    read_swag,
)

ROOT = Path(__file__).resolve().parents[3] / "data_specs"
GLUE, CONLL, SQUAD, SWAG = (
    ROOT / "glue_classification",
    ROOT / "conll_tagging",
    ROOT / "squad_qa",
    ROOT / "multiple_choice",
)


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def fails(match: str, call, *args, **kwargs) -> DataError:
    with pytest.raises(DataError, match=match) as info:
        call(*args, **kwargs)
    return info.value


# ----------------------------------------------------------------------------- GLUE


def test_glue_samples_parse() -> None:
    train = read_glue(GLUE / "train.tsv")
    dev = read_glue(GLUE / "dev.tsv", label_names=train.label_names)
    assert train.label_names == ["entailment", "not_entailment"]
    assert 40 <= len(train) <= 100 and 40 <= len(dev) <= 100
    first = train[0]
    assert isinstance(first, SentenceExample)
    assert first.pair is not None and first.id == "0" and first.line == 2
    assert first.label == train.label_names.index("entailment")
    labels = [dev[i].label for i in range(len(dev))]
    assert labels.count(0) == labels.count(1)  # balanced
    single = read_glue(GLUE / "single_train.tsv")
    assert single.label_names == ["0", "1"] and single[0].pair is None
    # lazy records pickle into DataLoader workers and read the same examples there
    assert pickle.loads(pickle.dumps(train))[5] == train[5]


def test_glue_jsonl_and_regression(tmp_path: Path) -> None:
    rows = [
        {"idx": 7, "sentence1": "A cat sat.", "sentence2": "A cat sits.", "score": 4.5},
        {"idx": 8, "sentence1": "A dog ran.", "sentence2": "Nobody\u2028moved.", "score": 0.25},
    ]
    path = write(tmp_path / "sts.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    data = read_glue(path, kind="regression", label_field="score")
    assert data.label_names == []
    assert [data[i].label for i in range(2)] == [4.5, 0.25]
    # U+2028 inside a string is text, not a line break: lines split on "\n" only
    assert data[1].pair == "Nobody\u2028moved." and data[1].id == "8" and data[1].line == 2
    bad = write(tmp_path / "bad.jsonl", json.dumps(rows[0]) + "\n" + '{"sentence1": "x"\n')
    fails(rf"{bad}:2: invalid JSON .*field 'json'", read_glue, bad, label_field="score")
    test_rows = [{"sentence": "a", "label": -1}, {"sentence": "b", "label": None}]
    test = write(tmp_path / "test.jsonl", "".join(json.dumps(r) + "\n" for r in test_rows))
    err = fails(rf"{test}:2: null label", read_glue, test)
    assert err.field == "label"
    unlabelled = read_glue(test, require_labels=False)
    assert [unlabelled[i].label for i in range(2)] == [None, None]
    nan = write(tmp_path / "nan.tsv", "sentence\tlabel\nfine\t3.0\nwords\thigh\n")
    fails(rf"{nan}:3: .*'high' is not a number .*field 'label'", read_glue, nan, kind="regression")


def test_glue_errors_name_file_line_field(tmp_path: Path) -> None:
    train = read_glue(GLUE / "train.tsv")
    unknown = write(
        tmp_path / "dev.tsv", "sentence1\tsentence2\tlabel\na\tb\tentailment\nc\td\tneutral\n"
    )
    err = fails(r"label 'neutral' is not one of", read_glue, unknown, label_names=train.label_names)
    assert (err.line, err.field) == (3, "label") and str(unknown) in str(err)
    columns = write(tmp_path / "cols.tsv", "sentence1\tsentence2\tlabel\na\tb\t0\nc\td\n")
    err = fails(r"2 tab-separated columns, but the header has 3", read_glue, columns)
    assert (err.line, err.field) == (3, "columns")
    no_label = write(tmp_path / "nolabel.tsv", "sentence\n a\n")
    err = fails(r"no label column 'label'", read_glue, no_label)
    assert (err.line, err.field) == (1, "label")
    assert read_glue(no_label, require_labels=False)[0].label is None
    no_text = write(tmp_path / "notext.tsv", "words\tlabel\na\t0\n")
    assert fails(r"no text column", read_glue, no_text).field == "sentence"
    empty = write(tmp_path / "empty.tsv", "sentence\tlabel\n\n")
    assert fails(r"no examples", read_glue, empty).field == "examples"
    blank_label = write(tmp_path / "blank.tsv", "sentence\tlabel\na\t \n")
    assert fails(r":2: empty label", read_glue, blank_label).field == "label"


def test_invalid_utf8_names_line_and_byte(tmp_path: Path) -> None:
    path = write(tmp_path / "latin1.tsv", b"sentence\tlabel\nfine\t0\n" + b"caf\xe9\t1\n")
    err = fails(
        r"latin1.tsv:3: not valid UTF-8 \(byte 0xe9 at byte 4 of the line\)", read_glue, path
    )
    assert err.field == "encoding"
    conll = write(tmp_path / "bad.conll", b"Paris B-LOC\nM\xfcnchen B-LOC\n")
    assert fails(r"bad.conll:2: not valid UTF-8", read_conll, conll).field == "encoding"
    squad = write(tmp_path / "bad.json", b'{"data": [\n"\xff"]}')
    err = fails(r"bad.json:2: not valid UTF-8 .*byte offset 12", read_squad, squad)
    assert err.field == "encoding"


# ----------------------------------------------------------------------------- CoNLL


def test_conll_samples_parse() -> None:
    train = read_conll(CONLL / "train.txt")
    dev = read_conll(CONLL / "dev.txt", label_names=train.label_names)
    assert train.label_names == [
        "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER", "O",
    ]  # fmt: skip
    assert len(train) > 100 and len(dev) > 30
    first = train[0]
    assert isinstance(first, TaggedExample)
    names = [train.label_names[t] for t in first.tags or []]
    assert first.words[:2] == ["Marie", "Curie"] and names[:2] == ["B-PER", "I-PER"]
    assert all(len(dev[i].words) == len(dev[i].tags or []) for i in range(len(dev)))


def test_conll_2003_columns_docstart_and_iob1(tmp_path: Path) -> None:
    text = (
        "-DOCSTART- -X- -X- O\n\n"
        "EU NNP B-NP I-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n\n"
        "Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n\n"
        "-DOCSTART- -X- -X- O\n"
        "Smith NNP B-NP I-PER\nJones NNP I-NP B-PER\n"
    )
    path = write(tmp_path / "eng.train", text)
    data = read_conll(path, scheme="IOB1")
    assert len(data) == 3  # -DOCSTART- ends a sentence and is skipped
    tags = [[data.label_names[t] for t in data[i].tags or []] for i in range(3)]
    assert tags == [["B-ORG", "O", "B-MISC", "O"], ["B-PER", "I-PER"], ["B-PER", "B-PER"]]
    assert data[2].line == 12 and data[2].words == ["Smith", "Jones"]
    err = fails(r"'I-ORG' continues an entity, but the previous tag is 'none'", read_conll, path)
    assert (err.line, err.field) == (3, "tag") and "scheme='IOB1'" in str(err)
    words = read_conll(path, tag_column=None)
    assert words[0].tags is None and words[0].words == ["EU", "rejects", "German", "call"]


def test_conll_errors(tmp_path: Path) -> None:
    wrong = write(tmp_path / "wrong.txt", "Paris B-LOC\nis O\nnice X-ADJ\n")
    err = fails(r"wrong.txt:3: tag 'X-ADJ' is not O, B-X or I-X", read_conll, wrong)
    assert err.field == "tag"
    switch = write(tmp_path / "switch.txt", "New B-LOC\nYork I-ORG\n")
    assert fails(r"switch.txt:2: 'I-ORG' continues", read_conll, switch).line == 2
    missing = write(tmp_path / "missing.txt", "Paris B-LOC\nnice\n")
    assert fails(r"missing.txt:2: .*no tag column", read_conll, missing).field == "tag"
    train = read_conll(CONLL / "train.txt")
    unknown = write(tmp_path / "dev.txt", "Paris B-LOC\n\nBlue B-COLOR\n")
    err = fails(r"dev.txt:3: label 'B-COLOR'", read_conll, unknown, label_names=train.label_names)
    assert err.field == "tag"
    empty = write(tmp_path / "empty.txt", "-DOCSTART- -X- -X- O\n\n\n")
    assert fails(r"no sentences", read_conll, empty).field == "examples"
    pos = read_conll(write(tmp_path / "pos.txt", "Paris NNP\nsleeps VBZ\n"), scheme="none")
    assert pos.label_names == ["NNP", "VBZ"]


# ----------------------------------------------------------------------------- SQuAD


def test_squad_samples_parse() -> None:
    train = read_squad(SQUAD / "train-v1.1.json")
    dev = read_squad(SQUAD / "dev-v1.1.json")
    assert not train.version_2 and not dev.version_2 and len(train) > 50 and len(dev) > 20
    v2 = read_squad(SQUAD / "dev-v2.0.json")
    assert v2.version_2
    impossible = [e for e in v2 if e.is_impossible]
    assert impossible and all(e.answers == [] for e in impossible)
    for example in list(train) + list(dev) + list(v2):
        assert isinstance(example, QAExample)
        for answer in example.answers:
            assert example.context[answer.start : answer.end] == answer.text
    assert train[0].path == "data[0].paragraphs[0].qas[0]"


def squad_file(
    tmp_path: Path, qas: list[dict], context: str = "Marie Curie was born in Warsaw."
) -> Path:
    doc = {
        "version": "1.1",
        "data": [
            {"paragraphs": [{"context": "Other.", "qas": []}]},
            {"paragraphs": [{"context": "x", "qas": []}, {"context": "y", "qas": []},
                            {"context": context, "qas": qas}]},
        ],
    }  # fmt: skip
    return write(tmp_path / "squad.json", json.dumps(doc))


def test_squad_errors_name_the_json_path(tmp_path: Path) -> None:
    good = {"id": "q0", "question": "Where?", "answers": [{"text": "Warsaw", "answer_start": 24}]}
    shifted = {"id": "q1", "question": "Who?", "answers": [{"text": "Curie", "answer_start": 0}]}
    err = fails(r"the context at 0 reads 'Marie', not the answer text 'Curie'", read_squad,
                squad_file(tmp_path, [good, shifted]))  # fmt: skip
    assert err.field == "data[1].paragraphs[2].qas[1].answers[0].answer_start"
    assert "set answer_start to 6" in str(err)
    absent = {"id": "q1", "question": "Who?", "answers": [{"text": "Pierre", "answer_start": 0}]}
    err = fails(r"does not occur in the context", read_squad, squad_file(tmp_path, [absent]))
    no_question = {"id": "q1", "answers": [{"text": "Marie", "answer_start": 0}]}
    err = fails(r"missing key 'question'", read_squad, squad_file(tmp_path, [no_question]))
    assert err.field == "data[1].paragraphs[2].qas[0].question"
    duplicate = fails(r"already used at data\[1\]\.paragraphs\[2\]\.qas\[0\]", read_squad,
                      squad_file(tmp_path, [good, good]))  # fmt: skip
    assert duplicate.field == "data[1].paragraphs[2].qas[1].id"
    both = {**good, "is_impossible": True}
    assert "qas[0].answers" in fails(r"is_impossible question has 1", read_squad,
                                     squad_file(tmp_path, [both])).field  # fmt: skip
    none = {"id": "q2", "question": "Where?", "answers": []}
    fails(r"answerable question has no answer", read_squad, squad_file(tmp_path, [none]))
    assert fails(r"no questions", read_squad, squad_file(tmp_path, [])).field == "examples"
    broken = write(tmp_path / "broken.json", '{"data": [\n  {"paragraphs": ]}')
    assert fails(r"broken.json:2: invalid JSON", read_squad, broken).field == "json"


# ----------------------------------------------------------------------------- SWAG


def test_swag_sample_and_errors(tmp_path: Path) -> None:
    train = read_swag(SWAG / "train.csv")
    dev = read_swag(SWAG / "dev.csv")
    assert len(train) > 40 and len(dev) > 20
    first = train[0]
    assert isinstance(first, ChoiceExample) and len(first.endings) == 4
    assert first.label is not None and first.id == "0"
    header = "sent1,sent2,ending0,ending1,ending2,label\n"
    path = write(tmp_path / "mc.csv", header + 'A man sits.,He,"stands, slowly.",runs.,sleeps.,0\n')
    example = read_swag(path)[0]
    assert example.endings == ["stands, slowly.", "runs.", "sleeps."] and example.label == 0
    bad = write(tmp_path / "bad.csv", header + "A.,B,c,d,e,0\nA.,B,c,d,e,3\n")
    err = fails(r"bad.csv:3: label '3' is not the index of one of the 3 endings", read_swag, bad)
    assert err.field == "label"
    short = write(tmp_path / "short.csv", header + "A.,B,c,d,0\n")
    assert (
        fails(r"short.csv:2: 5 fields, but the header has 6", read_swag, short).field == "columns"
    )
    no_sent2 = write(tmp_path / "nosent2.csv", "sent1,ending0,ending1,label\nA,b,c,0\n")
    assert (
        fails(r"nosent2.csv:1: the header row has no column 'sent2'", read_swag, no_sent2).field
        == "sent2"
    )
    empty = write(tmp_path / "empty.csv", header)
    fails(r"no examples", read_swag, empty)
    test = write(tmp_path / "test.csv", "sent1,sent2,ending0,ending1\nA.,B,c,d\n")
    assert read_swag(test, require_labels=False)[0].label is None
