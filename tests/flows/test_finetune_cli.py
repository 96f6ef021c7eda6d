"""`ptm finetune`: the task presets, model=<dir>, sweeps over seeds, and their errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from flows.config import compose_config
from flows.finetune import expand_sweep, model_overrides, summarize
from ptm_core.finetune.recipe import load_finetuned, predict

REPO = Path(__file__).resolve().parents[2]
FAST = ["model.num_layers=1", "trainer.progress=false", "trainer.log_every=5"]
TASKS = ["kg_pair", "sentiment", "kg_ner", "kg_squad", "kg_squad_v2", "kg_swag"]


@pytest.mark.parametrize("name", TASKS)
def test_every_task_preset_composes_with_existing_files(name: str) -> None:
    cfg = compose_config([f"task={name}"], config_name="finetune")
    assert cfg.recipe == "finetune"
    assert Path(cfg.task.train).is_file() and Path(cfg.task.dev).is_file()
    assert cfg.trainer.output_dir.endswith(f"finetune-{name}/seed0")


def test_model_directory_becomes_init_from_and_presets_stay_groups(tmp_path: Path) -> None:
    assert model_overrides([f"model={tmp_path}", "model=bert_tiny", "seed=1"]) == [
        f"init_from={tmp_path}",
        "model=bert_tiny",
        "seed=1",
    ]
    with pytest.raises(FileNotFoundError, match="no such directory"):
        model_overrides(["model=runs/none/final"])


def test_sweep_is_the_cartesian_product_in_hydra_syntax() -> None:
    combos = expand_sweep(["task=kg_pair", "seed=0,1", "trainer.learning_rate=1e-3,3e-3"])
    assert combos == [
        ["task=kg_pair", "seed=0", "trainer.learning_rate=0.001"],
        ["task=kg_pair", "seed=0", "trainer.learning_rate=0.003"],
        ["task=kg_pair", "seed=1", "trainer.learning_rate=0.001"],
        ["task=kg_pair", "seed=1", "trainer.learning_rate=0.003"],
    ]
    assert expand_sweep(["seed=range(0,3)"]) == [["seed=0"], ["seed=1"], ["seed=2"]]


def test_summary_is_mean_and_sample_std_over_seeds_per_setting() -> None:
    runs = [
        {"setting": "lr=1", "final_metrics": {"dev/accuracy": 0.5, "loss": 9.0}},
        {"setting": "lr=1", "final_metrics": {"dev/accuracy": 0.7}},
        {"setting": "lr=1", "final_metrics": {"dev/accuracy": 0.9}},
        {"setting": "lr=2", "final_metrics": {"dev/accuracy": 0.4}},
    ]
    rows = {row["setting"]: row for row in summarize(runs)}
    assert rows["lr=1"]["dev/accuracy"]["mean"] == pytest.approx(0.7)
    assert rows["lr=1"]["dev/accuracy"]["std"] == pytest.approx(0.2)  # sample std (n - 1)
    assert rows["lr=2"]["dev/accuracy"] == {"mean": 0.4, "std": 0.0, "n": 1}
    assert "loss" not in rows["lr=1"]  # training metrics are not summarised


@pytest.mark.integration
def test_finetune_from_a_pretrained_final_dir_then_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pre = tmp_path / "pre"
    assert (
        main(
            [
                "pretrain",
                "experiment=bert_tiny",
                "trainer.max_steps=4",
                f"trainer.output_dir={pre}",
                "model.num_layers=1",
                "data.max_length=64",
                "trainer.progress=false",
            ]
        )
        == 0
    )
    out = tmp_path / "ft"
    code = main(
        [
            "finetune",
            "task=kg_pair",
            f"model={pre / 'final'}",
            "trainer.max_steps=6",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
        ]
    )
    assert code == 0, capsys.readouterr().err
    evaluation = json.loads((out / "eval.json").read_text())
    assert 0.0 <= evaluation["dev/accuracy"] <= 1.0
    model, _tokenizer, task, record = load_finetuned(out / "final")
    assert record["provenance"]["init_from"] == str(pre / "final")
    assert task.name == "kg_pair" and model.encoder.config.num_layers == 1
    # The final model's dev metrics are what the run reported.
    metrics, predictions = predict(out / "final")
    assert metrics["accuracy"] == pytest.approx(evaluation["dev/accuracy"])
    assert set(predictions) <= {"entailment", "not_entailment"}
    # An unlabelled file of the same format: predictions only.
    rows = (REPO / "data_specs/glue_classification/dev.tsv").read_text().splitlines()
    unlabelled = tmp_path / "test.tsv"
    unlabelled.write_text(
        "\n".join("\t".join(line.split("\t")[:3]) for line in rows) + "\n", encoding="utf-8"
    )
    metrics2, predictions2 = predict(out / "final", unlabelled)
    assert metrics2 == {} and predictions2 == predictions


@pytest.mark.integration
def test_multirun_over_two_seeds_prints_mean_and_std(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "finetune",
            "--multirun",
            "task=sentiment",
            "seed=0,1",
            "trainer.max_steps=3",
            f"trainer.output_dir={tmp_path}/seed${{seed}}",
            *FAST,
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "[2/2] finetune" in out
    # each run ends with its own table (metrics and folders), then the sweep's summary
    lines = out.splitlines()
    assert [line for line in lines if line == "finetune sentiment"] == ["finetune sentiment"] * 2
    for seed in (0, 1):
        final = [line for line in lines if line.strip().startswith("final model")]
        assert any(line.endswith(f"seed{seed}/final") for line in final), final
    assert out.index("seed1/final") < out.index("| task=sentiment")
    table = [line for line in lines if line.startswith("| task=sentiment")]
    assert len(table) == 1 and "| 2 |" in table[0] and " ± " in table[0]
    assert (tmp_path / "seed0" / "eval.json").exists() and (
        tmp_path / "seed1" / "eval.json"
    ).exists()


def test_bad_task_settings_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["finetune", "task=kg_pair", f"task.train={tmp_path}/none.tsv"])
    assert code == 1
    err = capsys.readouterr().err
    assert "train file" in err and "none.tsv" in err and "task.train=" in err
    assert main(["finetune", "task=nope"]) == 2
    assert "kg_pair" in capsys.readouterr().err  # Hydra lists the valid presets
