"""``ptm wordnet-kg`` on the WordNet fixture: both styles, refusals, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from ptm_knowledge.kg import load_knowledge_graph

FIXTURE = Path(__file__).resolve().parents[1] / "knowledge" / "fixtures" / "wordnet"


def _ptm(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["wordnet-kg", *argv, "--wordnet-dir", str(FIXTURE)])
    out, err = capsys.readouterr()
    return code, out, err


def test_full_kg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _ptm(capsys, str(tmp_path / "kg"))
    assert (code, err) == (0, "")
    assert "entities   32" in out and "triples    54" in out and str(tmp_path / "kg") in out
    kg = load_knowledge_graph(tmp_path / "kg")
    assert (len(kg), len(kg.triples)) == (32, 54)
    code, _, _ = _ptm(capsys, str(tmp_path / "all"), "--pos", "all")
    assert code == 0 and len(load_knowledge_graph(tmp_path / "all")) == 51


def test_wn18rr_style(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "wn18rr"
    code, out, _ = _ptm(capsys, str(out_dir), "--style", "wn18rr", "--min-triples", "1")
    assert code == 0
    assert "entities   39 (WN18RR: 40943)" in out and "relations  11" in out
    summary = json.loads((out_dir / "wn18rr.json").read_text(encoding="utf-8"))
    assert summary["settings"] == {
        "seed": 0,
        "min_triples": 1,
        "valid_size": 1,
        "test_size": 1,
        "grouping": "pair",
    }
    first = {n: (out_dir / f"{n}.tsv").read_bytes() for n in ("train", "valid", "test")}
    code, _, _ = _ptm(capsys, str(out_dir), "--style", "wn18rr", "--min-triples", "1")
    assert code == 1  # an earlier output: only with --overwrite
    code, _, _ = _ptm(
        capsys, str(out_dir), "--style", "wn18rr", "--min-triples", "1", "--overwrite"
    )
    assert code == 0  # the same command again: the same files
    assert first == {n: (out_dir / f"{n}.tsv").read_bytes() for n in first}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "1"], "--seed, --min-triples and --grouping apply to --style wn18rr only"),
        (["--style", "wn18rr", "--pos", "n"], "--style wn18rr needs every part of speech"),
    ],
)
def test_bad_switches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _ptm(capsys, str(tmp_path / "kg"), *argv)
    assert (code, out) == (1, "") and err.startswith(f"ptm: {message}")
    assert err.count("\n") == 1 and not (tmp_path / "kg").exists()


def test_refusals_and_missing_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    code, _, err = _ptm(capsys, str(mine), "--overwrite")
    assert code == 1 and "ptm did not write it" in err
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"
    code = main(["wordnet-kg", str(tmp_path / "kg"), "--wordnet-dir", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert str(tmp_path / "none") in err and "apt-get install wordnet-base" in err
