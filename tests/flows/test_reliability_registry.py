"""Registry and retrain reliability: candidate folders, locking, streamed fingerprints."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flow_settings import FAST

from flows.registry import ModelRegistry

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample"

# Each process waits for the start file so both write the registry at the same time.
CONSIDER_MANY = """
import sys, time
from pathlib import Path
from flows.registry import ModelRegistry
root, name, start, count = sys.argv[1], sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
registry = ModelRegistry(root)
(start.parent / f"ready-{name}").touch()
while not start.exists():
    time.sleep(0.01)
for i in range(count):
    registry.consider(f"{name}/{i}", {"loss": float(i)}, metric="loss", higher_is_better=False)
"""


def _tree_digest(directory: Path) -> dict[str, str]:
    """SHA-256 of every file under ``directory``, by relative path."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _small_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    documents = (CORPUS / "corpus.txt").read_text().split("\n\n")
    (corpus / "part1.txt").write_text("\n\n".join(documents[:20]) + "\n")
    return corpus


@pytest.mark.parametrize(
    ("writers", "each"),
    [(2, 200), pytest.param(4, 100, marks=pytest.mark.stress)],  # 400 entries either way
)
def test_processes_considering_at_once_lose_no_history(
    tmp_path: Path, writers: int, each: int
) -> None:
    root, start = tmp_path / "registry", tmp_path / "start"
    names = [chr(ord("a") + i) for i in range(writers)]
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", CONSIDER_MANY, str(root), name, str(start), str(each)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{name}").exists() for name in names):
        assert time.monotonic() < deadline, "the writers did not start"
        assert all(p.poll() is None for p in processes), "a writer ended before the start"
        time.sleep(0.05)
    start.touch()
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    history = ModelRegistry(root).history()
    assert len(history) == writers * each
    for name in names:
        mine = [h["model_dir"] for h in history if h["model_dir"].startswith(f"{name}/")]
        assert mine == [f"{name}/{i}" for i in range(each)]  # each process's order is kept


def test_consider_refuses_to_compare_the_champion_with_itself(tmp_path: Path) -> None:
    registry = ModelRegistry(tmp_path / "registry")
    champion_dir = tmp_path / "runs" / "abc-1" / "final"
    registry.consider(champion_dir, {"loss": 6.6}, metric="loss", higher_is_better=False)
    with pytest.raises(ValueError, match="is the champion itself"):
        registry.consider(
            str(champion_dir) + "/", {"loss": 6.6}, metric="loss", higher_is_better=False
        )
    assert len(registry.history()) == 1


def test_fingerprint_streams_and_matches_whole_file_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.retrain import fingerprint_data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    big = os.urandom(3 * 1024 * 1024 + 17)  # spans several chunks, last one partial
    (corpus / "a.txt").write_bytes(big)
    (corpus / "b.txt").write_bytes(b"second file\n")
    expected = hashlib.sha256(b"a.txt" + big + b"b.txt" + b"second file\n").hexdigest()

    def no_whole_reads(self: Path) -> bytes:
        raise AssertionError(f"read_bytes() of a whole corpus file: {self}")

    monkeypatch.setattr(Path, "read_bytes", no_whole_reads)
    # The same digest as before streaming, so existing registries see no spurious change.
    assert fingerprint_data.fn(str(corpus)) == expected


def test_fingerprint_of_an_unchanged_corpus_is_read_from_the_last_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.retrain import corpus_stat, fingerprint_data

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"first file\n")
    real = fingerprint_data.fn(str(corpus))
    state = {"data_fingerprint": real, "data_stat": corpus_stat(str(corpus))}

    opened: list[Path] = []
    original_open = Path.open

    def counting_open(self: Path, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        opened.append(self)
        return original_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", counting_open)
    # Unchanged files: the recorded fingerprint, and no corpus byte read.
    assert fingerprint_data.fn(str(corpus), state) == real
    assert opened == []
    # A new file, or a changed one, is hashed again.
    (corpus / "b.txt").write_bytes(b"second file\n")
    grown = fingerprint_data.fn(str(corpus), state)
    assert grown != real and opened
    assert grown == fingerprint_data.fn(str(corpus))
    state = {"data_fingerprint": grown, "data_stat": corpus_stat(str(corpus))}
    (corpus / "a.txt").write_bytes(b"first file, edited\n")
    assert fingerprint_data.fn(str(corpus), state) not in (grown, real)


def test_candidate_folder_never_reuses_a_champion_but_resumes_a_crashed_run(
    tmp_path: Path,
) -> None:
    from flows.retrain import claim_run_dir

    registry_dir = tmp_path / "registry"
    registry = ModelRegistry(registry_dir)
    fingerprint = "0123456789abcdef" + "0" * 48
    first, lock = claim_run_dir(registry_dir, fingerprint, registry)
    lock.release()
    assert first.name == "0123456789abcdef-1"
    registry.consider(first / "final", {"loss": 6.0}, metric="loss", higher_is_better=False)

    second, lock = claim_run_dir(registry_dir, fingerprint, registry)
    lock.release()
    assert second.name == "0123456789abcdef-2"  # the champion's folder is never a candidate's
    (second / "checkpoints").mkdir(parents=True)  # a crash: trained, never considered

    resumed, lock = claim_run_dir(registry_dir, fingerprint, registry)
    lock.release()
    assert resumed == second


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_forced_retrain_on_unchanged_data_never_touches_the_champion(tmp_path: Path) -> None:
    from flows.retrain import retrain

    corpus = _small_corpus(tmp_path)
    registry_dir = tmp_path / "registry"
    eval_corpus = str(CORPUS / "corpus.txt")
    common = [*FAST, "trainer.learning_rate=2e-3"]

    first = retrain(str(corpus), str(registry_dir), [*common, "trainer.max_steps=10"], eval_corpus)
    assert first["status"] == "promoted"
    champion_run = Path(first["candidate"]).parent
    before = _tree_digest(champion_run)
    assert "final/model.safetensors" in before

    forced = retrain(
        str(corpus),
        str(registry_dir),
        [*common, "trainer.max_steps=30"],
        eval_corpus,
        force=True,
    )
    assert _tree_digest(champion_run) == before
    assert Path(forced["candidate"]).parent != champion_run
    # Not a self-comparison: the candidate and the re-scored champion differ.
    scores = re.findall(r"\d+\.\d{4}", forced["reason"])
    assert len(scores) == 2 and scores[0] != scores[1], forced["reason"]
    history = ModelRegistry(registry_dir).history()
    assert [h["model_dir"] for h in history] == [first["candidate"], forced["candidate"]]


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_second_concurrent_retrain_on_the_same_run_is_refused(tmp_path: Path) -> None:
    from filelock import FileLock

    from flows.retrain import fingerprint_data, retrain

    corpus = _small_corpus(tmp_path)
    registry_dir = tmp_path / "registry"
    fingerprint = fingerprint_data.fn(str(corpus))
    runs = registry_dir.resolve() / "runs"
    runs.mkdir(parents=True)
    lock_file = runs / f"{fingerprint[:16]}-1.lock"
    with FileLock(lock_file), pytest.raises(ValueError) as refused:
        retrain(str(corpus), str(registry_dir), [*FAST, "trainer.max_steps=5"])
    message = str(refused.value)
    assert "\n" not in message
    assert "another retrain" in message and str(lock_file) in message
    assert "wait" in message and "stale" in message
    assert not (runs / f"{fingerprint[:16]}-1" / "checkpoints").exists()  # nothing trained
    assert ModelRegistry(registry_dir).history() == []
    assert not (registry_dir / "state.json").exists()
