"""The evaluate flow picks the evaluation of each family: XLM retrieval, image-text matching."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from flows.config import compose_config
from flows.runner import run_composed

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

ROOT = Path(__file__).resolve().parents[2]


def _train(experiment: str, out: Path, *extra: str) -> str:
    cfg = compose_config(
        [f"experiment={experiment}", f"trainer.output_dir={out}", "trainer.progress=false", *extra]
    )
    return str(run_composed(cfg).encoder_dir)


def test_xlm_model_is_scored_by_retrieval_against_random_init(tmp_path: Path) -> None:
    from flows.evaluate import evaluate

    model_dir = _train("xlm_tlm_tiny", tmp_path / "xlm", "trainer.max_steps=30")
    held_out = ROOT / "data_specs" / "parallel_corpus" / "heldout"
    result = evaluate(model_dir, corpus=str(held_out))
    assert result["family"] == "xlm" and result["metric"] == "retrieval/mean"
    assert 0.0 <= result["model"]["retrieval/mean"] <= 1.0
    assert any(k.startswith("retrieval/en-") for k in result["model"])
    assert "random init" in Path(result["report"]).read_text()


def test_multimodal_model_is_scored_by_matching(tmp_path: Path) -> None:
    from flows.evaluate import evaluate

    model_dir = _train("visualbert_tiny", tmp_path / "vb", "trainer.max_steps=20")
    pairs = tmp_path / "vb" / "data" / "eval"  # the synthetic evaluation set of the run
    result = evaluate(model_dir, corpus=str(pairs))
    assert result["family"] == "multimodal"
    assert 0.0 <= result["model"]["matching/accuracy"] <= 1.0
    assert "matching_shuffled/accuracy" in result["baseline"]


def test_unknown_directory_is_a_clear_error(tmp_path: Path) -> None:
    from flows.evaluation import model_family

    with pytest.raises(ValueError, match="cannot tell which evaluation fits"):
        model_family(tmp_path)


@pytest.mark.filterwarnings("ignore:fit_reasoner")
def test_cogqa_model_is_scored_against_system1_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from flows.evaluate import evaluate

    model_dir = _train(
        "cogqa_tiny",
        tmp_path / "cogqa",
        "cogqa.reader_epochs=2",
        "cogqa.reasoner_epochs=1",
        "data.num_train=30",
    )
    questions = ROOT / "data_specs" / "multihop_qa" / "sample" / "bridge_sample.json"
    final = Path(model_dir).parent  # final/ holds the reader's encoder/ and the system
    monkeypatch.setenv("PTM_PROGRESS", "lines")  # as in CI and Prefect's logs
    with caplog.at_level(logging.INFO, logger="ptm_core.progress"):
        result = evaluate(str(final), corpus=str(questions))
    total = len(json.loads(questions.read_text()))
    # the model and System 1 alone are each scored with a progress line at their end
    done = [r.getMessage() for r in caplog.records if r.name == "ptm_core.progress"]
    assert sum(f"evaluate: {total}/{total} questions" in line for line in done) == 2, done
    assert result["family"] == "cogqa" and result["metric"] == "joint_f1"
    assert 0.0 <= result["model"]["joint_f1"] <= 1.0
    assert "System 1 only" in Path(result["report"]).read_text()


def test_xlnet_model_is_scored_by_permutation_lm_against_random_init(tmp_path: Path) -> None:
    from flows.evaluate import evaluate
    from flows.evaluation import model_family

    model_dir = _train(
        "xlnet_tiny",
        tmp_path / "xlnet",
        "trainer.max_steps=40",
        "trainer.learning_rate=2e-3",
        "model.num_layers=1",
        "model.hidden_size=64",
        "model.intermediate_size=128",
        "data.max_length=64",
        "data.batch_size=8",
    )
    assert model_family(model_dir) == "permutation_lm"
    result = evaluate(model_dir, corpus=str(ROOT / "data_specs/text_corpus/sample/corpus.txt"))
    assert result["family"] == "permutation_lm" and result["metric"] == "accuracy"
    model, baseline = result["model"], result["baseline"]
    assert model["predictions"] == baseline["predictions"] > 100  # the same seeded targets
    assert model["loss"] < baseline["loss"] - 0.5
