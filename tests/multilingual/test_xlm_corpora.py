"""Monolingual and parallel corpus specs: the bundled sample and file:line errors."""

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

ROOT = Path(__file__).resolve().parents[2] / "data_specs"


def test_bundled_samples_load() -> None:
    mono = read_monolingual_corpora(ROOT / "monolingual_corpus" / "sample")
    assert sorted(mono) == ["de", "en", "fr"]
    assert len(mono["en"]) > len(mono["fr"]) > len(mono["de"]) > 100
    corpora = {c.name: c for c in read_parallel_corpora(ROOT / "parallel_corpus" / "sample")}
    assert set(corpora) == {"en-fr", "en-de", "de-fr"}
    assert all(len(c.pairs) >= 100 for c in corpora.values())
    assert corpora["de-fr"].pairs[0][0].startswith("Die ")  # aligned-files format, de first
    held = read_parallel_corpora(ROOT / "parallel_corpus" / "heldout")
    train_pairs = {p for c in corpora.values() for p in c.pairs}
    assert not any(p in train_pairs for c in held for p in c.pairs)


def test_tsv_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "en-fr.tsv"
    bad.write_text("The cat.\tLe chat.\nThe dog. Le chien.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"en-fr\.tsv:2: expected 2 tab-separated columns"):
        read_parallel_tsv(bad)
    bad.write_text("The cat.\tLe chat.\nThe dog.\t \n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"en-fr\.tsv:2: empty side \(field 'fr'\)"):
        read_parallel_tsv(bad)
    odd = tmp_path / "english.tsv"
    odd.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="language pair"):
        read_parallel_tsv(odd)


def test_aligned_files_must_have_equal_lines(tmp_path: Path) -> None:
    (tmp_path / "en-de.en").write_text("One.\nTwo.\nThree.\n", encoding="utf-8")
    (tmp_path / "en-de.de").write_text("Eins.\nZwei.\n", encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"en-de\.en:3: en-de\.en has 3 lines but en-de\.de has 2"
    ):
        read_parallel_files(tmp_path / "en-de.en", tmp_path / "en-de.de")
    (tmp_path / "en-de.de").write_text("Eins.\n\nDrei.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"en-de\.de:2: empty side"):
        read_parallel_corpora(tmp_path)
    (tmp_path / "en-de.de").unlink()
    with pytest.raises(CorpusError, match="need en and de"):
        read_parallel_corpora(tmp_path)


def test_monolingual_errors(tmp_path: Path) -> None:
    (tmp_path / "english.txt").write_text("Hello.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="not a language code"):
        read_monolingual_corpora(tmp_path)
    (tmp_path / "english.txt").unlink()
    (tmp_path / "fr.txt").write_bytes(b"Bonjour.\n\xff\xfe\n")
    with pytest.raises(CorpusError, match=r"fr\.txt:2: not valid UTF-8"):
        read_monolingual_corpora(tmp_path)
