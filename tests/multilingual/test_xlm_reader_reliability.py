"""Reliability of the multilingual corpus readers: NUL, line splitting, encodings."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptm_core.data import CorpusError
from ptm_multilingual import (
    read_monolingual_corpora,
    read_parallel_corpora,
    read_parallel_files,
    read_parallel_tsv,
)


def _write(path: Path, content: str | bytes) -> Path:
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def test_nul_in_a_parallel_tsv_pair_names_file_line_and_side(tmp_path: Path) -> None:
    path = _write(tmp_path / "en-fr.tsv", "The cat.\tLe chat.\nThe dog.\tLe ch\x00ien.\n")
    with pytest.raises(CorpusError) as err:
        read_parallel_tsv(path)
    assert (err.value.line, err.value.field) == (2, "fr")
    assert str(err.value).startswith(f"{path}:2: NUL character (\\x00) at character 6")


def test_nul_in_aligned_files_names_the_file_and_line(tmp_path: Path) -> None:
    _write(tmp_path / "en-de.en", "One.\nTwo.\n")
    de = _write(tmp_path / "en-de.de", "Eins.\nZw\x00ei.\n")
    with pytest.raises(CorpusError) as err:
        read_parallel_files(tmp_path / "en-de.en", de)
    assert (err.value.path, err.value.line, err.value.field) == (str(de), 2, "text")
    with pytest.raises(CorpusError, match=r"en-de\.de:2: NUL character"):
        read_parallel_corpora(tmp_path)


def test_nul_in_a_monolingual_corpus_is_rejected(tmp_path: Path) -> None:
    _write(tmp_path / "en.txt", "Hello.\n\nWor\x00ld.\n")
    with pytest.raises(CorpusError, match=r"en\.txt:3: NUL character .*\(field 'text'\)"):
        read_monolingual_corpora(tmp_path)


def test_u2028_is_text_not_a_line_break(tmp_path: Path) -> None:
    path = _write(tmp_path / "en-fr.tsv", "A\u2028B.\tC\u2029D.\n\x85x\tz\nbad line\n")
    with pytest.raises(CorpusError, match=r"en-fr\.tsv:3: expected 2 tab-separated columns"):
        read_parallel_tsv(path)
    _write(path, "A\u2028B.\tC\u2029D.\r\nE.\tF.")
    assert read_parallel_tsv(path).pairs == (("A\u2028B.", "C\u2029D."), ("E.", "F."))


def test_invalid_utf8_in_a_parallel_tsv_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "en-fr.tsv", b"\xef\xbb\xbfA.\tB.\nC.\t\xe9t\xe9.\n")
    with pytest.raises(CorpusError) as err:
        read_parallel_tsv(path)
    assert (err.value.line, err.value.field) == (2, "encoding")
    assert "re-encode the file as UTF-8" in str(err.value)
