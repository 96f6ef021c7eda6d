"""``ptm wordnet-typing`` on the WordNet fixture."""

from __future__ import annotations

from pathlib import Path

from flows.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "knowledge" / "fixtures" / "wordnet"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["wordnet-typing", *argv, "--wordnet-dir", str(FIXTURE)])
    out, err = capsys.readouterr()
    return code, out, err


def test_writes_the_three_splits(tmp_path: Path, capsys) -> None:
    code, out, _ = _run(capsys, str(tmp_path / "task"), "--labels", "2", "--sentences", "2")
    assert code == 0, out
    assert "labels     noun.animal, noun.act" in out
    for split in ("train", "dev", "test"):
        lines = (tmp_path / "task" / f"{split}.tsv").read_text().splitlines()
        assert lines[0] == "label\tsentence\tentity" and len(lines) > 1
    # a second run without --overwrite refuses; with it, replaces (same bytes: deterministic)
    before = (tmp_path / "task" / "train.tsv").read_bytes()
    code, _, err = _run(capsys, str(tmp_path / "task"), "--labels", "2", "--sentences", "2")
    assert code == 1 and "--overwrite" in err
    code, _, _ = _run(
        capsys, str(tmp_path / "task"), "--labels", "2", "--sentences", "2", "--overwrite"
    )
    assert code == 0 and (tmp_path / "task" / "train.tsv").read_bytes() == before


def test_bad_lexname_is_one_line(tmp_path: Path, capsys) -> None:
    code, _, err = _run(capsys, str(tmp_path / "task"), "--lexnames", "noun.animal,noun.foo")
    assert code == 1 and err.count("\n") == 1 and "noun.foo" in err
    assert not (tmp_path / "task").exists()
