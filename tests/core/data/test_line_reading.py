"""The shared line reader (``ptm_core.data.lines``) and the readers built on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptm_core.data import CorpusError, DataError, read_text_corpus
from ptm_core.data.lines import iter_lines, read_utf8
from ptm_core.training.metrics import MetricsLog

# Every character str.splitlines() breaks on besides "\n" and "\r".
SPLITLINES_ONLY = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


def _write(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def test_iter_lines_splits_on_newline_only(tmp_path: Path) -> None:
    text = f"a{SPLITLINES_ONLY}b\r\n\r\nlast line"
    path = _write(tmp_path / "f.txt", b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert list(iter_lines(path)) == [(1, f"a{SPLITLINES_ONLY}b"), (2, ""), (3, "last line")]
    _write(path, b"x\n\xef\xbb\xbfy\n")  # a BOM is dropped only at the start of the file
    assert list(iter_lines(path)) == [(1, "x"), (2, "\ufeffy")]
    _write(path, b"")
    assert list(iter_lines(path)) == []


def test_iter_lines_reports_invalid_utf8_with_the_line_and_the_reader_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "f.tsv", "ok\nstill \u2028 ok\n".encode() + b"bad \xff byte\n")
    with pytest.raises(CorpusError) as err:
        list(iter_lines(path, CorpusError))
    assert (err.value.line, err.value.field) == (3, "encoding")
    assert str(err.value) == (
        f"{path}:3: not valid UTF-8 (byte 0xff at byte 5 of the line) (field 'encoding'); "
        "re-encode the file as UTF-8 (e.g. iconv -f <its encoding> -t UTF-8)"
    )
    with pytest.raises(DataError, match=r"missing\.txt: file not found \(field 'path'\)"):
        list(iter_lines(tmp_path / "missing.txt"))


def test_read_utf8_names_line_and_byte_offset(tmp_path: Path) -> None:
    path = _write(tmp_path / "q.json", b'\xef\xbb\xbf[\n{"a": "\xc3\xa9"},\n{"b": "\xff"}\n]')
    with pytest.raises(DataError) as err:
        read_utf8(path)
    assert err.value.line == 3
    assert "byte 0xff at byte offset 25 of the file" in str(err.value)
    _write(path, b"\xef\xbb\xbf" + "[\u2028]".encode())
    assert read_utf8(path) == "[\u2028]"


def test_text_corpus_keeps_u2028_inside_a_sentence(tmp_path: Path) -> None:
    path = _write(tmp_path / "c.txt", "One\u2028line.\nTwo.\n\nThree.\n".encode())
    docs = read_text_corpus(path)
    assert [d.sentences for d in docs] == [("One\u2028line.", "Two."), ("Three.",)]
    assert docs[1].source == f"{path}:4"


def test_metrics_log_reads_records_holding_raw_u2028(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    records = [{"step": 1, "note": "a\u2028b"}, {"step": 2, "note": "c\x85d"}]
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8"
    )
    log = MetricsLog(path)
    assert log.read() == records
    log.truncate_after(1)
    assert log.read() == records[:1]
