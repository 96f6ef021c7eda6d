"""Issue 31, item 1: ptm never deletes what it did not write (``ptm_core.atomic``).

Every folder published by ``atomic_directory`` carries ptm's marker; a file, a link or a
folder without the marker is never replaced, and a marked one only when the caller allows.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from ptm_core.atomic import (
    OUTPUT_MARKER,
    TRAINING_HINT,
    DiskFullError,
    OutputExistsError,
    atomic_directory,
    check_output_directory,
    read_output_marker,
    written_by_ptm_before_markers,
)


def _write(path: Path, **files: str) -> None:
    with atomic_directory(path, kind="table") as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text)


def test_a_published_folder_carries_the_marker(tmp_path: Path) -> None:
    _write(tmp_path / "out", **{"rows.tsv": "a\tb\n"})
    marker = read_output_marker(tmp_path / "out")
    assert marker is not None and marker["kind"] == "table" and marker["written_by"] == "ptm"
    assert json.loads((tmp_path / "out" / OUTPUT_MARKER).read_text())["ptm_version"]


def test_a_missing_path_and_an_empty_folder_are_written(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "empty", **{"w.txt": "1"})
    _write(tmp_path / "new" / "deeper", **{"w.txt": "2"})
    assert (tmp_path / "empty" / "w.txt").read_text() == "1"
    assert (tmp_path / "new" / "deeper" / "w.txt").read_text() == "2"


def test_a_user_folder_is_never_replaced_and_left_intact(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("x")
    with pytest.raises(OutputExistsError, match="ptm did not write it") as caught:
        _write(mine, **{"model.bin": "weights"})
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]
    assert (mine / "keep.txt").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no temporary left


def test_a_file_is_never_turned_into_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "notes"
    target.write_text("my notes")
    with pytest.raises(OutputExistsError, match="is a file, not a folder"):
        _write(target, **{"a": "b"})
    assert target.read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]  # no hidden .old copy


def test_a_link_is_never_replaced(tmp_path: Path) -> None:
    real = tmp_path / "real"
    _write(real, **{"a": "1"})
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(OutputExistsError, match="symbolic link"):
        _write(tmp_path / "link", **{"a": "2"})
    assert (real / "a").read_text() == "1" and (tmp_path / "link").is_symlink()


def test_a_marked_folder_is_replaced_only_when_the_caller_allows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, **{"old.txt": "old"})
    refused = pytest.raises(OutputExistsError, match="pass --overwrite to replace it")
    with refused, atomic_directory(out, kind="table", overwrite=False, option="--overwrite") as tmp:
        (tmp / "new.txt").write_text("new")
    assert (out / "old.txt").read_text() == "old"
    with atomic_directory(out, kind="table", overwrite=True) as tmp:
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == [OUTPUT_MARKER, "new.txt"]


def test_the_refusal_names_the_other_kind(tmp_path: Path) -> None:
    _write(tmp_path / "out", **{"a": "1"})
    with pytest.raises(
        OutputExistsError, match="holds another ptm output \\(kind 'table', not 'export'\\)"
    ):
        check_output_directory(
            tmp_path / "out", kind="export", overwrite=False, option="--overwrite"
        )


def test_a_user_folder_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("x")
    with pytest.raises(OutputExistsError, match="not even with --overwrite"):
        check_output_directory(tmp_path / "d", kind="export", overwrite=True, option="--overwrite")


def test_a_final_written_before_the_marker_is_replaced_by_ptm_itself(tmp_path: Path) -> None:
    old = tmp_path / "run" / "final"
    old.mkdir(parents=True)
    (old / "config.json").write_text(json.dumps({"ptm_model": "bert", "hidden_size": 8}))
    (old / "model.safetensors").write_bytes(b"old weights")
    (old / "heads.safetensors").write_bytes(b"a head the new save does not write")
    assert written_by_ptm_before_markers(old)
    with atomic_directory(old, kind="final") as tmp:
        (tmp / "config.json").write_text("{}")
    assert not (old / "heads.safetensors").exists()
    # ...but never by a writer of a user-named folder (an export, --output).
    old2 = tmp_path / "run" / "final2"
    old2.mkdir()
    (old2 / "config.json").write_text(json.dumps({"ptm_model": "bert"}))
    with pytest.raises(OutputExistsError), atomic_directory(old2, legacy=False) as tmp:
        (tmp / "config.json").write_text("{}")


def test_a_pre_marker_cache_entry_is_replaced_only_by_the_same_names(tmp_path: Path) -> None:
    entry = tmp_path / "cache" / "3f9a"
    entry.mkdir(parents=True)
    (entry / "manifest.json").write_text('{"rows": 3}')
    (entry / "ids.npy").write_bytes(b"old")
    _write(entry, **{"manifest.json": '{"rows": 4}', "ids.npy": "new"})
    assert (entry / "ids.npy").read_text() == "new"
    (entry / OUTPUT_MARKER).unlink()  # pre-marker again, now with a stranger's file
    (entry / "notes.md").write_text("mine")
    with pytest.raises(OutputExistsError):
        _write(entry, **{"manifest.json": "{}", "ids.npy": "newer"})
    assert (entry / "notes.md").read_text() == "mine" and (entry / "ids.npy").read_text() == "new"


def test_a_crash_leaves_the_old_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, **{"a": "old"})
    with pytest.raises(KeyError), atomic_directory(out, kind="table") as tmp:
        (tmp / "a").write_text("half")
        raise KeyError("crash")
    assert (out / "a").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_the_full_disk_advice_depends_on_the_writer(tmp_path: Path) -> None:
    def fill(tmp: Path) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(DiskFullError) as caught, atomic_directory(tmp_path / "x") as tmp:
        fill(tmp)
    message = str(caught.value)
    assert "no space left" in message and "training resumes" not in message
    assert not message.startswith("[Errno")
    assert "training resumes" in str(caught.value.with_hint(TRAINING_HINT))
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_only_an_earlier_output_of_the_same_kind(tmp_path: Path) -> None:
    # A user's --overwrite never lets an export replace a run's final/ (found by trying it:
    # `ptm export --overwrite A runs/b/final` deleted run b's trained model).
    _write(tmp_path / "final", **{"model.safetensors": "weights"})
    with pytest.raises(OutputExistsError, match="replaces only an earlier export there, even"):
        check_output_directory(
            tmp_path / "final", kind="export", overwrite=True, option="--overwrite"
        )
    assert (tmp_path / "final" / "model.safetensors").read_text() == "weights"


def test_overwrite_keeps_a_file_the_user_added_to_an_earlier_output(tmp_path: Path) -> None:
    out = tmp_path / "hf"
    _write(out, **{"config.json": "{}"})
    (out / "my_notes.md").write_text("notes")
    refused = pytest.raises(OutputExistsError, match=r"files ptm did not write \(my_notes.md\)")
    with refused, atomic_directory(out, kind="table", overwrite=True, option="--overwrite") as tmp:
        (tmp / "config.json").write_text("{}")
    assert (out / "my_notes.md").read_text() == "notes"
    (out / "my_notes.md").unlink()
    with atomic_directory(out, kind="table", overwrite=True, option="--overwrite") as tmp:
        (tmp / "config.json").write_text('{"new": 1}')
    assert (out / "config.json").read_text() == '{"new": 1}'
