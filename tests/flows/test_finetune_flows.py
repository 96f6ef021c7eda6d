"""Downstream metrics in the flows: `evaluate` on a fine-tuned model and with --task, the
`finetune` flow under Prefect, and `retrain` gated on a task's dev metric."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from flow_settings import FAST

from flows.evaluate import evaluate
from flows.evaluation import model_family
from flows.finetune import run_one
from flows.finetune_flow import finetune
from flows.pretrain import pretrain
from flows.registry import ModelRegistry

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data_specs" / "text_corpus" / "sample"
TINY_FT = ["trainer.max_steps=4", "trainer.log_every=2", "trainer.progress=false"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pre")
    summary = pretrain([*FAST, "trainer.max_steps=6", f"trainer.output_dir={out}"])
    return Path(summary["encoder_dir"])


def test_evaluate_scores_a_finetuned_model_with_its_task_metric(
    pretrained: Path, tmp_path: Path
) -> None:
    run = run_one(
        ["task=sentiment", f"init_from={pretrained}", f"trainer.output_dir={tmp_path}", *TINY_FT]
    )
    final = run["final_dir"]
    assert model_family(final) == "finetuned"
    result = evaluate(final, report_path=str(tmp_path / "report.md"))
    assert result["family"] == "finetuned" and result["metric"] == "accuracy"
    assert result["model"]["accuracy"] == pytest.approx(run["final_metrics"]["dev/accuracy"])
    assert 0.0 <= result["baseline"]["accuracy"] <= 1.0
    report = (tmp_path / "report.md").read_text()
    assert "random init" in report and "**accuracy:" in report


def test_broken_task_json_is_named_before_any_model_loads(tmp_path: Path) -> None:
    (tmp_path / "task.json").write_text('{"kind": "classification"}')
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"task\.json.*'task'"):
        model_family(tmp_path)


def test_evaluate_reports_downstream_metrics_beside_intrinsic_ones(
    pretrained: Path, tmp_path: Path
) -> None:
    result = evaluate(
        str(pretrained),
        report_path=str(tmp_path / "report.md"),
        tasks=["sentiment"],
        task_overrides=TINY_FT,
    )
    assert result["family"] == "masked_lm"
    for side in ("model", "baseline"):
        assert "accuracy" in result[side]  # the intrinsic masked-LM accuracy
        assert 0.0 <= result[side]["sentiment/accuracy"] <= 1.0
    assert "sentiment/accuracy" in (tmp_path / "report.md").read_text()
    # Fine-tuning ran in scratch folders beside the report, never in the model's folder.
    assert (tmp_path / "downstream" / "model" / "sentiment" / "eval.json").exists()
    assert (tmp_path / "downstream" / "random" / "sentiment" / "eval.json").exists()
    assert not (pretrained / "eval.json").exists()


def _two_seed_sweep(tmp_path: Path) -> dict[str, Any]:
    return finetune(
        [
            "task=sentiment",
            "model.num_layers=1",
            "seed=0,1",
            f"trainer.output_dir={tmp_path}/s${{seed}}",
            *TINY_FT,
        ],
        multirun=True,
    )


def test_finetune_flow_under_prefect_summarises_two_seeds(tmp_path: Path) -> None:
    logged: list[str] = []  # what the task runs log (Prefect's own handlers, no propagation)
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    task_log = logging.getLogger("prefect.task_runs")
    task_log.addHandler(handler)
    try:
        result = _two_seed_sweep(tmp_path)
    finally:
        task_log.removeHandler(handler)
    assert len(result["runs"]) == 2
    # each run's end table in the run log, as `ptm finetune` prints it
    titles = [m for m in logged if m.lstrip("\n").startswith("finetune sentiment\n")]
    assert len(titles) == 2, logged
    (row,) = result["summary"]
    assert row["seeds"] == 2 and row["dev/accuracy"]["n"] == 2
    # Each run's label report is in its folder and published, beside the summary.
    assert all(Path(run["label_report"]).is_file() for run in result["runs"])
    import asyncio

    from prefect.client.orchestration import get_client

    async def latest() -> dict[str, str]:
        async with get_client() as client:
            return {str(a.key): str(a.data) for a in await client.read_latest_artifacts()}

    artifacts = asyncio.run(latest())
    assert "| metric | mean ± std |" in artifacts["finetune-report"]
    assert "| label | P | R | F1 | n |" in artifacts["finetune-labels"]


def test_retrain_gates_on_a_downstream_metric(tmp_path: Path) -> None:
    from flows.retrain import retrain

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    documents = (CORPUS / "corpus.txt").read_text().split("\n\n")
    (corpus / "part1.txt").write_text("\n\n".join(documents[:20]) + "\n")
    registry_dir = tmp_path / "registry"
    common = [*FAST, "trainer.max_steps=4"]
    # 20 documents are too few to hold 1 in 20 out: the held-out text is given.
    held_out = str(CORPUS / "corpus.txt")
    first = retrain(
        str(corpus),
        str(registry_dir),
        common,
        held_out,
        gate_task="sentiment",
        gate_overrides=TINY_FT,
    )
    assert first["status"] == "promoted"
    assert "sentiment/accuracy" in first["scores"]
    (corpus / "part2.txt").write_text("\n\n".join(documents[20:]) + "\n")
    champion_dir = Path(ModelRegistry(registry_dir).champion()["model_dir"])
    before = {p: p.read_bytes() for p in champion_dir.parent.rglob("*") if p.is_file()}
    second = retrain(
        str(corpus),
        str(registry_dir),
        common,
        held_out,
        gate_task="sentiment",
        gate_overrides=TINY_FT,
    )
    history = ModelRegistry(registry_dir).history()
    assert history[-1]["metric"] == "sentiment/accuracy", json.dumps(history[-1])
    assert second["status"] in ("promoted", "rejected")
    # Both sides were fine-tuned in the candidate's folder; the champion's files are unchanged.
    run_dir = Path(second["candidate"]).parent
    assert (run_dir / "downstream" / "champion" / "eval.json").exists()
    assert {p: p.read_bytes() for p in champion_dir.parent.rglob("*") if p.is_file()} == before


def test_evaluate_scores_a_kbert_final_with_its_kg(tmp_path: Path) -> None:
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            "experiment=kbert_tiny_cls",
            "model.num_layers=1",
            "trainer.max_steps=3",
            "trainer.progress=false",
            f"trainer.output_dir={tmp_path / 'kbert'}",
        ]
    )
    result = run_composed(cfg)
    final = str(result.encoder_dir)
    assert model_family(final) == "kbert"
    report = evaluate(final, report_path=str(tmp_path / "report.md"))
    assert report["metric"] == "accuracy"
    assert report["model"]["accuracy"] == pytest.approx(result.final_metrics["dev/accuracy"])
    assert 0.0 <= report["baseline"]["accuracy"] <= 1.0
