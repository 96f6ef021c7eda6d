"""Damaged inputs of ``ptm prepare`` fail with one ``file:line`` error, never a traceback or
a hang: truncated or corrupt ``.gz``/``.zst``, lone surrogates, deep nesting, a FIFO."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from ptm_core.data.corpus import CorpusError, read_text_corpus
from ptm_core.data.prepare import prepare_corpus
from ptm_core.tokenization import SPECIAL_TOKENS

zstandard = pytest.importorskip("zstandard")


def _jsonl(lines: int) -> bytes:
    return "".join(
        json.dumps({"text": f"Quartz {i} hums. Basalt {i} sleeps.", "id": f"q{i}"}) + "\n"
        for i in range(lines)
    ).encode()


@pytest.fixture
def vocab(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.txt"
    words = ["quartz", "hums", "basalt", "sleeps", ".", *[str(i) for i in range(10)]]
    path.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n", encoding="utf-8")
    return path


def _prepare_error(path: Path, vocab: Path, out: Path) -> CorpusError:
    with pytest.raises(CorpusError) as caught:
        prepare_corpus([path], out, tokenizer=vocab, workers=0, progress=False)
    assert not list((out / "shards").glob("*.tokens")), "a shard of a damaged input was kept"
    assert not (out / "manifest.json").exists()
    return caught.value


def test_truncated_gzip_names_the_file_and_line(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "rocks.jsonl.gz"
    path.write_bytes(gzip.compress(_jsonl(4000))[:-200])
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert error.field == "compression" and error.line is not None and error.line > 1
    assert str(path) in str(error) and "truncated or corrupt" in str(error)


def test_corrupt_gzip_header(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "rocks.txt.gz"
    path.write_bytes(b"\x1f\x8b\x09" + bytes(range(200)))
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert error.field == "compression" and "before its first line" in str(error)


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_zstd_is_not_an_empty_corpus(tmp_path: Path, vocab: Path, keep: float) -> None:
    path = tmp_path / "rocks.jsonl.zst"
    data = zstandard.ZstdCompressor().compress(_jsonl(3000))
    path.write_bytes(data[: int(len(data) * keep)])
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert "no sentences" not in str(error)
    assert error.field == "compression" and str(path) in str(error)


def test_corrupt_zstd_frame(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "rocks.txt.zst"
    data = bytearray(zstandard.ZstdCompressor().compress(_jsonl(500)))
    data[len(data) // 2 : len(data) // 2 + 16] = bytes(16)
    path.write_bytes(bytes(data))
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert error.field == "compression"


def test_two_zstd_frames_read_whole(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "rocks.jsonl.zst"
    compressor = zstandard.ZstdCompressor()
    lines = _jsonl(20).splitlines(keepends=True)
    path.write_bytes(
        compressor.compress(b"".join(lines[:10])) + compressor.compress(b"".join(lines[10:]))
    )
    corpus = prepare_corpus([path], tmp_path / "out", tokenizer=vocab, workers=0, progress=False)
    assert corpus.num_documents == 20


def test_unpaired_surrogate_names_the_line(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"text": "Fine line."}\n{"text": "Broken \\udc80 char."}\n', encoding="utf-8")
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert (error.line, error.field) == (2, "text") and "surrogate" in str(error)
    with pytest.raises(CorpusError, match=r"odd\.jsonl:2: unpaired surrogate U\+DC80"):
        read_text_corpus(path)


def test_deep_nesting_names_the_line(tmp_path: Path, vocab: Path) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text('{"text": "ok"}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    error = _prepare_error(path, vocab, tmp_path / "out")
    assert (error.line, error.field) == (2, "json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_refused_not_read(tmp_path: Path, vocab: Path) -> None:
    fifo = tmp_path / "stream.jsonl"
    os.mkfifo(fifo)
    # Before the check, opening the FIFO blocked forever: nobody writes to it.
    with pytest.raises(CorpusError, match=r"stream\.jsonl: not a regular file \(a named pipe"):
        prepare_corpus([fifo], tmp_path / "out", tokenizer=vocab, workers=0, progress=False)
    with pytest.raises(CorpusError, match="not a regular file"):
        read_text_corpus(fifo)
