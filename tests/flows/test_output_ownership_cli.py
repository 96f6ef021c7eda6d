"""Issue 31, item 1: `ptm export`, `ptm compress` and `ptm embed-kg` never replace a user's
folder or file; `--overwrite` replaces only what ptm wrote (its marker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.cli import main
from ptm_core import bert_encoder
from ptm_core.atomic import OUTPUT_MARKER, read_output_marker
from ptm_core.tokenization import WordPieceTokenizer

# Not the sample vocabulary: other words, another size.
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "##s", *(f"vq{i}" for i in range(37))]


@pytest.fixture(scope="module")
def final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("own-run")
    (root / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    encoder = bert_encoder(vocab_size=len(WORDS), hidden_size=16, num_layers=1, num_heads=2)
    encoder.save_pretrained(
        root / "final", tokenizer=WordPieceTokenizer.from_vocab(root / "vocab.txt")
    )
    return root / "final"


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if line.startswith("ptm: ")]
    assert len(lines) == 1 and not any("Traceback" in line for line in err), err
    return lines[0]


def _user_folder(path: Path) -> Path:
    path.mkdir()
    (path / "keep.txt").write_text("x\n")
    return path


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_export_into_a_user_folder_is_refused_and_keeps_its_files(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], overwrite: list[str]
) -> None:
    d = _user_folder(tmp_path / "d")
    assert main(["export", str(final), str(d), *overwrite]) == 1
    line = _error(capsys)
    assert str(d) in line and "--overwrite" in line
    assert sorted(p.name for p in d.iterdir()) == ["keep.txt"]
    assert (d / "keep.txt").read_text() == "x\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # nothing hidden beside it


def test_export_onto_a_file_is_refused_and_the_file_kept(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "model.bin"
    target.write_bytes(b"my weights")
    assert main(["export", str(final), str(target), "--overwrite"]) == 1
    assert "is a file, not a folder" in _error(capsys)
    assert target.read_bytes() == b"my weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.bin"]


def test_export_replaces_an_earlier_export_only_with_overwrite(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "hf"
    assert main(["export", str(final), str(out)]) == 0
    marker = read_output_marker(out)
    assert marker is not None and marker["kind"] == "export"
    old_config = (out / "config.json").stat().st_ino  # tells the old folder from the new
    capsys.readouterr()
    assert main(["export", str(final), str(out)]) == 1
    assert "earlier ptm export; pass --overwrite" in _error(capsys)
    # A file the user added since is never deleted, not even with --overwrite.
    (out / "my_notes.md").write_text("mine")
    assert main(["export", str(final), str(out), "--overwrite"]) == 1
    assert "files ptm did not write (my_notes.md)" in _error(capsys)
    assert (out / "my_notes.md").read_text() == "mine"
    assert (out / "config.json").stat().st_ino == old_config
    (out / "my_notes.md").unlink()
    assert main(["export", str(final), str(out), "--overwrite"]) == 0
    assert (out / OUTPUT_MARKER).is_file() and (out / "config.json").is_file()
    assert (out / "config.json").stat().st_ino != old_config


def test_compress_refuses_a_user_folder_and_replaces_its_own_with_overwrite(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _user_folder(tmp_path / "d")
    command = ["compress", str(final), "--method", "int8"]
    assert main([*command, "--output", str(d), "--overwrite"]) == 1
    assert "not even with --overwrite" in _error(capsys)
    assert sorted(p.name for p in d.iterdir()) == ["keep.txt"]
    out = tmp_path / "int8"
    assert main([*command, "--output", str(out)]) == 0
    capsys.readouterr()
    assert main([*command, "--output", str(out)]) == 1
    assert "pass --overwrite" in _error(capsys)
    assert main([*command, "--output", str(out), "--overwrite"]) == 0
    marker = read_output_marker(out)
    assert marker is not None and marker["kind"] == "compress"


def test_embed_kg_refuses_a_user_folder_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / "entities.tsv").write_text("id\tname\nq1\tQix\nq2\tQux\n", encoding="utf-8")
    (kg / "triples.tsv").write_text("q1\tnear\tq2\n", encoding="utf-8")
    d = _user_folder(tmp_path / "d")
    assert main(["embed-kg", "--kg", str(kg), "--output", str(d), "--overwrite"]) == 1
    err = capsys.readouterr().err
    assert "not even with --overwrite" in err and "Starting temporary server" not in err
    assert sorted(p.name for p in d.iterdir()) == ["keep.txt"]
