"""Issue 31, item 11 (output paths): one line, no traceback, nothing left half-written, for
an output path that cannot be written and for a disk that fills up.

A full disk is simulated as the other tests do (tests/core/training/test_reliability_writes.py):
the write raises ``OSError(ENOSPC)``; the free space is whatever the test disk has.
"""

from __future__ import annotations

import errno
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

import ptm_core.data.shard_writer
from flows.artifacts import REPORT_MARKER, write_report
from flows.cli import main
from flows.registry import ModelRegistry
from ptm_core.atomic import DiskFullError
from ptm_core.data.prepare import prepare_corpus

WORDS = ["plinth", "quaver", "zither", "marlin", "osprey", "tundra", "vellum", "wicket"]


def _corpus(folder: Path, documents: int = 12) -> Path:
    """A JSONL corpus of made-up sentences (not the bundled samples)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "notes.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for d in range(documents):
            words = [WORDS[(d * 3 + i) % len(WORDS)] for i in range(6 + d % 4)]
            text = f"{' '.join(words).capitalize()}. The {WORDS[d % 8]} sat by the {WORDS[-1]}."
            out.write(json.dumps({"id": f"n{d}", "text": text}) + "\n")
    return path


def _kg(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "entities.tsv").write_text(
        "id\tname\ttype\taliases\tdescription\n"
        + "".join(f"w{i}\t{w.capitalize()}\tthing\t\tA {w}.\n" for i, w in enumerate(WORDS)),
        encoding="utf-8",
    )
    return folder


def _vocab(folder: Path) -> Path:
    path = folder / "vocab.txt"
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "the", "sat", "by"]
    path.write_text("\n".join([*specials, *WORDS]) + "\n", encoding="utf-8")
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if line.startswith("ptm: ")]
    assert len(lines) == 1 and not any("Traceback" in line for line in err), err
    return lines[0]


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def _enospc(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_prepare_output_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus(tmp_path / "in")
    target = tmp_path / "prepared"
    target.write_text("my file\n")
    assert main(["prepare", str(corpus), "--output", str(target)]) == 1
    line = _one_line(capsys)
    assert str(target) in line and "existing file" in line
    assert target.read_text() == "my file\n"


def test_prepare_never_writes_into_a_users_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus(tmp_path / "in")
    mine = tmp_path / "mine"
    (mine / "cache").mkdir(parents=True)  # prepare empties its own cache/ folder
    (mine / "cache" / "keep.txt").write_text("x")
    assert main(["prepare", str(corpus), "--output", str(mine)]) == 1
    assert "not a prepared corpus" in _one_line(capsys)
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*")) == ["cache", "cache/keep.txt"]


@pytest.mark.parametrize("theirs", ["manifest.json", "shards/my.bin", "plan.json"])
def test_prepare_never_writes_into_a_folder_with_files_named_like_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], theirs: str
) -> None:
    # A user's own manifest.json (or shards/, plan.json) does not make a folder ptm's: it is
    # recognised by its content, the format "ptm-prepared/1" (ptm prepare overwrote a user's
    # manifest.json when the name alone counted).
    corpus = _corpus(tmp_path / "in")
    mine = tmp_path / "mine"
    (mine / theirs).parent.mkdir(parents=True, exist_ok=True)
    (mine / theirs).write_text('{"app": "mine"}')
    assert main(["prepare", str(corpus), "--output", str(mine), "--workers", "0"]) == 1
    assert "not a prepared corpus" in _one_line(capsys)
    assert (mine / theirs).read_text() == '{"app": "mine"}'
    assert sorted(p.name for p in mine.rglob("*") if p.is_file()) == [Path(theirs).name]


def test_trainer_output_dir_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "run"
    target.write_text("not a folder\n")
    code = main(["pretrain", "experiment=bert_tiny", f"trainer.output_dir={target}"])
    assert code == 2
    line = _one_line(capsys)
    assert "trainer" in line and f"{target} is an existing file" in line
    assert target.read_text() == "not a folder\n"


def test_link_output_that_is_a_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus(tmp_path / "in")
    kg = _kg(tmp_path / "kg")
    out = tmp_path / "linked"
    out.mkdir()
    code = main(["link", "--corpus", str(corpus), "--kg", str(kg), "--output", str(out)])
    assert code == 1
    assert f"--output {out} is a folder" in _one_line(capsys)
    assert list(out.iterdir()) == []


def test_a_full_disk_during_prepare_is_one_error_and_leaves_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus(tmp_path / "in")
    out = tmp_path / "prepared"
    monkeypatch.setattr(ptm_core.data.shard_writer, "_tokenize", _enospc)
    with pytest.raises(DiskFullError) as caught:
        prepare_corpus([corpus], out, tokenizer=_vocab(tmp_path), workers=0, progress=False)
    message = str(caught.value)
    assert "no space left on the device" in message and "\n" not in message
    assert "training resumes" not in message
    assert _temporaries(tmp_path) == []
    # A worker process sends it back pickled (ptm prepare --workers N).
    assert str(pickle.loads(pickle.dumps(caught.value))) == message


def test_a_full_disk_while_pretrain_prepares_its_cache_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus(tmp_path / "in", documents=30)
    cache = tmp_path / "cache"
    monkeypatch.setattr(ptm_core.data.shard_writer, "_tokenize", _enospc)
    code = main(
        [
            "pretrain",
            "experiment=bert_tiny",
            f"trainer.output_dir={tmp_path / 'run'}",
            f"data.corpus={corpus}",
            f"data.tokenizer={_vocab(tmp_path)}",
            f"data.cache_dir={cache}",
            "trainer.max_steps=1",
        ]
    )
    assert code == 1
    line = _one_line(capsys)
    assert "no space left on the device" in line and str(cache) in line
    assert _temporaries(tmp_path) == []


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_a_full_disk_during_ptm_link_is_one_line_and_leaves_no_temporary_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ptm_knowledge.linking.corpus

    kg = _kg(tmp_path / "kg")
    corpus = _corpus(tmp_path / "in")
    output = tmp_path / "out" / "linked.jsonl"
    monkeypatch.setattr(ptm_knowledge.linking.corpus, "linked_corpus_line", _enospc)
    command = ["link", "--corpus", str(corpus), "--kg", str(kg), "--output", str(output)]
    assert main([*command, "--shard-size", "3"]) == 1
    line = _one_line(capsys)
    assert "no space left on the device" in line and "training resumes" not in line
    assert not output.exists() and _temporaries(tmp_path) == []


def test_a_report_never_overwrites_a_file_ptm_did_not_write(tmp_path: Path) -> None:
    mine = tmp_path / "evaluation.md"
    mine.write_text("# My notes on the run\n")
    with pytest.raises(ValueError, match="ptm did not write it"):
        write_report(mine, "# Evaluation of `x`\n")
    assert mine.read_text() == "# My notes on the run\n"
    with pytest.raises(ValueError, match="is a folder"):
        write_report(tmp_path, "# Evaluation of `x`\n")
    ours = tmp_path / "report.md"
    write_report(ours, "# Evaluation of `a`\n")
    write_report(ours, "# Evaluation of `b`\n")  # its own earlier report: replaced
    assert ours.read_text() == f"{REPORT_MARKER}\n# Evaluation of `b`\n"
    old = tmp_path / "old.md"
    old.write_text("# Evaluation of `runs/a/final`\n\nwritten before the marker\n")
    write_report(old, "# Evaluation of `c`\n")
    assert "`c`" in old.read_text()


def test_a_registry_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    target = tmp_path / "registry"
    target.write_text("mine\n")
    refused = pytest.raises(ValueError, match="is a file, and a registry is a folder")
    with refused, ModelRegistry(target, mlflow=None).locked():
        pass
    assert target.read_text() == "mine\n"
