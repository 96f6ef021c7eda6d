"""Evaluation and retraining score held-out documents of the user's own data (#31 item 4)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from flow_settings import FAST

from ptm_core.data.corpus import read_text_corpus
from ptm_core.data.held_out import split_held_out

WORDS = [
    "amber",
    "basalt",
    "cobalt",
    "delta",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kelp",
    "lagoon",
]


def _corpus(path: Path, documents: int, seed: int) -> Path:
    """Documents of 2-6 sentences over a vocabulary unlike the bundled sample's."""
    rng = random.Random(seed)
    blocks = []
    for d in range(documents):
        sentences = [
            " ".join([f"doc{seed}x{d}", *rng.choices(WORDS, k=rng.randint(6, 14))]) + "."
            for _ in range(rng.randint(2, 6))
        ]
        blocks.append("\n".join(sentences))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def _ids(corpus: str | Path) -> list[str]:
    return [doc.sentences[0].split()[0] for doc in read_text_corpus(corpus)]


def test_split_is_deterministic_disjoint_and_stable_as_the_corpus_grows(tmp_path: Path) -> None:
    folder = tmp_path / "corpus"
    _corpus(folder / "a.txt", 600, seed=1)
    first = split_held_out(folder, tmp_path / "s1", every=10)
    again = split_held_out(folder, tmp_path / "s2", every=10)
    assert Path(first.held_out).read_bytes() == Path(again.held_out).read_bytes()
    held, train = set(_ids(first.held_out)), set(_ids(first.train))
    assert not held & train and len(held | train) == 600
    assert first.held_out_documents == len(held) and 30 <= len(held) <= 90  # ~1 in 10
    _corpus(folder / "b.txt", 300, seed=2)  # the corpus grows
    grown = split_held_out(folder, tmp_path / "s3", every=10)
    assert held <= set(_ids(grown.held_out))  # held out before, held out still
    record = json.loads((tmp_path / "s3" / "held_out.json").read_text())
    assert record["held_out_documents"] == grown.held_out_documents
    capped = split_held_out(folder, tmp_path / "s4", every=10, max_held_out=5)
    bucket = grown.held_out_documents
    assert capped.held_out_documents == 5 and capped.left_out == bucket - 5
    assert capped.train_documents == 900 - bucket  # the bucket past the cap is not trained on
    assert "left out" in capped.describe()
    # Past the cap, the training part does not depend on the order of the files.
    (folder / "a.txt").rename(folder / "z.txt")
    reordered = split_held_out(folder, tmp_path / "s5", every=10, max_held_out=5)
    assert sorted(_ids(reordered.train)) == sorted(_ids(capped.train))


def test_too_small_a_corpus_to_hold_out_is_refused(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tiny.txt", 3, seed=3)
    with pytest.raises(ValueError, match=r"3 documents.*--eval-corpus") as info:
        split_held_out(corpus, tmp_path / "split", every=50)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "split" / "train.txt").exists()


def _pretrain(corpus: Path, out: Path, steps: int = 4) -> str:
    from flows.pretrain import pretrain

    summary = pretrain(
        [*FAST, f"data.corpus={corpus}", f"trainer.max_steps={steps}", f"trainer.output_dir={out}"]
    )
    return str(summary["encoder_dir"])


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_evaluate_needs_the_users_held_out_data_and_keeps_one_report_per_model(
    tmp_path: Path, capsys, caplog
) -> None:
    from flows.evaluate import evaluate

    corpus = _corpus(tmp_path / "mine.txt", 120, seed=4)
    held_out = _corpus(tmp_path / "held_out.txt", 40, seed=5)
    model_a = _pretrain(corpus, tmp_path / "runs" / "a")
    model_b = _pretrain(corpus, tmp_path / "runs" / "b", steps=6)
    # Its own vocabulary, no recorded split: the bundled sample is not a default.
    with pytest.raises(ValueError, match=r"recorded no held-out split.*--corpus"):
        evaluate(model_a)
    first = evaluate(model_a, corpus=str(held_out))
    second = evaluate(model_b, corpus=str(held_out))
    assert Path(first["report"]) == tmp_path / "runs" / "a" / "evaluation-final.md"
    assert Path(first["report"]).is_file() and Path(second["report"]).is_file()
    out = capsys.readouterr().out + caplog.text  # flows print through Prefect's log
    tokens = first["model"]["predictions"]
    assert f"{tokens:,} tokens scored" in out and "model: accuracy" in out
    assert f"{tokens:,} tokens scored" in Path(first["report"]).read_text()
    # A file the user owns at the report path is never replaced.
    mine = tmp_path / "notes.md"
    mine.write_text("my notes\n")
    with pytest.raises(ValueError, match="ptm did not write it"):
        evaluate(model_a, corpus=str(held_out), report_path=str(mine))
    assert mine.read_text() == "my notes\n"
    # Two models are not compared on fewer tokens than the minimum.
    few = _corpus(tmp_path / "few.txt", 2, seed=6)
    with pytest.raises(ValueError, match=r"tokens scored, fewer than the 1,000 needed"):
        evaluate(model_a, corpus=str(few), baseline=model_b)
    compared = evaluate(model_a, corpus=str(few), baseline=model_b, min_tokens=1)
    assert compared["baseline"]["predictions"] == compared["model"]["predictions"]


@pytest.mark.integration
@pytest.mark.usefixtures("prefect_harness")
def test_retrain_holds_out_its_own_corpus_and_refuses_a_thin_comparison(
    tmp_path: Path, caplog
) -> None:
    from flows.evaluate import evaluate
    from flows.registry import ModelRegistry
    from flows.retrain import retrain

    folder = tmp_path / "corpus"
    _corpus(folder / "part1.txt", 400, seed=7)
    registry_dir = tmp_path / "registry"
    first = retrain(str(folder), str(registry_dir), [*FAST, "trainer.max_steps=4"])
    assert first["status"] == "promoted"
    run_dir = Path(first["candidate"]).parent
    record = json.loads((run_dir / "data_split" / "held_out.json").read_text())
    held = set(_ids(record["held_out"]))
    assert held and not held & set(_ids(record["train"]))
    assert ModelRegistry(registry_dir).history()[-1]["eval_corpus"] == record["held_out"]
    out = caplog.text  # flows print through Prefect's log
    assert "held out:" in out and "tokens scored" in out and "candidate: accuracy" in out
    # ptm evaluate of the candidate finds the split its run recorded.
    result = evaluate(first["candidate"])
    assert "held-out split of its run" in caplog.text
    assert result["model"]["predictions"] == first["scores"]["predictions"]

    _corpus(folder / "part2.txt", 100, seed=8)
    with pytest.raises(ValueError, match="fewer than the 10,000,000 needed"):
        retrain(
            str(folder),
            str(registry_dir),
            [*FAST, "trainer.max_steps=4"],
            min_eval_tokens=10_000_000,
        )
    assert ModelRegistry(registry_dir).champion()["model_dir"] == first["candidate"]


def test_a_negative_token_floor_is_refused_before_any_work(capsys: pytest.CaptureFixture) -> None:
    from flows.cli import main

    for argv in (
        ["evaluate", "no/such/model", "--min-tokens", "-5"],
        ["retrain", "--corpus", "no/such/corpus", "--min-eval-tokens", "-1"],
    ):
        with pytest.raises(SystemExit) as stop:
            main(argv)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "expected a whole number >= 0" in err and "no/such" not in err
