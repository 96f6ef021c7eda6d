"""CogQA's multi-hop data read lazily: a streaming pass validates, records parse per index."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch

from ptm_knowledge.cogqa import hotpot_file
from ptm_knowledge.cogqa.batches import ReaderSpanBatches
from ptm_knowledge.cogqa.data import (
    generate_bridge_questions,
    read_hotpot_json,
    write_hotpot_json,
)
from ptm_knowledge.cogqa.examples import MultiHopDataError
from ptm_knowledge.cogqa.hotpot_file import MultiHopFile, open_hotpot_json
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderConfig
from ptm_knowledge.cogqa.training import build_vocab


@pytest.fixture(scope="module")
def examples(sample_kg):
    found = generate_bridge_questions(sample_kg, num_questions=12, seed=0)
    # Non-ASCII text: multi-byte characters fall across chunk boundaries below.
    found[3].question = "Où est née Marie Skłodowska-Curie ? ☃"
    return found


@pytest.mark.parametrize("chunk", [7, 100, 1 << 20])
@pytest.mark.parametrize("layout", ["list", "one-line", "jsonl", "bom"])
def test_streamed_records_equal_the_file(examples, tmp_path, monkeypatch, chunk, layout):
    monkeypatch.setattr(hotpot_file, "CHUNK", chunk)
    records = [e.to_json() for e in examples]
    path = tmp_path / "train.json"
    if layout == "list":
        write_hotpot_json(examples, path)
    elif layout == "one-line":  # HotpotQA's own layout: the whole list on one line
        path.write_text(json.dumps(records), encoding="utf-8")
    elif layout == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        path.write_bytes(b"\xef\xbb\xbf" + json.dumps(records, indent=2).encode("utf-8"))
    lazy = open_hotpot_json(path)
    assert isinstance(lazy, MultiHopFile) and len(lazy) == len(examples)
    assert lazy.spans.dtype.name == "int64"
    for i in (11, 0, 3, -1, 5):  # any order
        assert lazy[i].to_json() == records[i]
    assert [e.to_json() for e in pickle.loads(pickle.dumps(lazy))] == records


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


def test_a_bad_record_fails_with_file_and_line(examples, tmp_path, monkeypatch):
    monkeypatch.setattr(hotpot_file, "CHUNK", 64)
    path = write_hotpot_json(examples, tmp_path / "train.json")
    lines = _lines(path)
    record = json.loads(lines[8].rstrip(","))
    record["answer"] = 3
    lines[8] = json.dumps(record) + ","
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(MultiHopDataError) as err:
        open_hotpot_json(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line 9 (record 7, _id {record['_id']!r})"), message
    assert "field 'answer'" in message and "Fix:" in message


def test_broken_json_deep_in_the_file_names_line_and_column(examples, tmp_path, monkeypatch):
    monkeypatch.setattr(hotpot_file, "CHUNK", 64)
    path = write_hotpot_json(examples, tmp_path / "train.json")
    lines = _lines(path)
    lines[10] = lines[10].replace('"question": ', '"question" ', 1)
    path.write_text("\n".join(lines), encoding="utf-8")
    column = lines[10].index('"question" ') + len('"question" ') + 1
    with pytest.raises(MultiHopDataError, match=rf"train\.json:11:{column}: invalid JSON"):
        open_hotpot_json(path)


def test_invalid_utf8_names_line_and_byte_offset(examples, tmp_path, monkeypatch):
    monkeypatch.setattr(hotpot_file, "CHUNK", 50)
    path = write_hotpot_json(examples, tmp_path / "train.json")
    data = path.read_bytes()
    line_start = 0
    for _ in range(6):  # start of line 7
        line_start = data.index(b"\n", line_start) + 1
    offset = line_start + 20
    path.write_bytes(data[:offset] + b"\xff" + data[offset + 1 :])
    with pytest.raises(MultiHopDataError) as err:
        open_hotpot_json(path)
    message = str(err.value)
    assert message.startswith(f"{path}:7: field 'encoding': not valid UTF-8"), message
    assert f"byte offset {offset} of the file" in message


def test_reader_batches_from_a_lazy_file_equal_those_from_a_list(examples, tmp_path):
    path = write_hotpot_json(examples, tmp_path / "train.json")
    lazy, eager = open_hotpot_json(path), read_hotpot_json(path)
    reader = CogQAReader(build_vocab(lazy), ReaderConfig(hidden_size=16, num_layers=1))
    assert build_vocab(eager).tokens == reader.vocab.tokens
    settings = {"batch_size": 4, "num_distractors": 1, "seed": 0}
    a = list(ReaderSpanBatches(lazy, reader, **settings).iter_batches(1))
    b = list(ReaderSpanBatches(eager, reader, **settings).iter_batches(1))
    assert len(a) == len(b) > 0
    for x, y in zip(a, b, strict=True):
        assert all(torch.equal(x[k], y[k]) for k in x)
