"""What `ptm evaluate` and the demo write: the model named, counts apart from scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from flows.demo import console_summary
from flows.evaluation_report import comparison_tables, model_description, parameter_count


def _final(tmp_path: Path) -> Path:
    final = tmp_path / "run-a" / "final"
    final.mkdir(parents=True)
    save_file(
        {"embed": np.zeros((1000, 64), np.float32), "out.bias": np.zeros(1000, np.float32)},
        str(final / "model.safetensors"),
    )
    config = {"ptm_model": "masked_lm", "num_layers": 2, "hidden_size": 64, "vocab_size": 1000}
    (final / "config.json").write_text(json.dumps(config))
    return final


def test_the_model_is_named_by_folder_family_kind_and_size(tmp_path: Path) -> None:
    final = _final(tmp_path)
    assert parameter_count(final) == 1000 * 64 + 1000
    assert model_description(final, "bert") == (
        "run-a/final (bert, masked_lm; 65k parameters; layers 2, hidden 64, vocab 1000)"
    )
    # A folder without config or weights is still named, nothing is guessed.
    bare = tmp_path / "kg"
    bare.mkdir()
    assert model_description(bare, "kg_embedding") == "kg (kg_embedding)"


def test_scores_run_down_the_rows_and_counts_get_no_difference() -> None:
    # ERNIE-THU's dEA reports how many candidates and corrupted mentions it scored.
    counted = {"dea/candidates": 14.0, "dea/corrupted": 7.5}
    scores = {"accuracy": 0.4, "loss": 3.0, "perplexity": 20.0, "mlm/predictions": 251, "_x": 1}
    scores |= counted
    base = {"accuracy": 0.1, "loss": 6.0, "perplexity": 400.0, "mlm/predictions": 251}
    markdown = comparison_tables(scores, base, "random init", "accuracy")
    tables = markdown.split("\n\n")
    assert tables[0].splitlines()[0] == "| score | model | random init | difference |"
    assert "| accuracy * | 0.4 | 0.1 | 0.3 |" in tables[0]
    assert "| loss | 3 | 6 | -3 |" in tables[0]
    assert "predictions" not in tables[0] and "_x" not in markdown
    assert tables[1].startswith("Counts and reference rates")
    assert tables[2].splitlines()[0] == "| count | model | random init |"
    assert "| mlm/predictions | 251 | 251 |" in tables[2]
    assert "| dea/candidates | 14 |  |" in tables[2] and "dea/corrupted" not in tables[0]


def test_a_task_metric_that_reads_like_no_score_stays_a_score() -> None:
    scores = {"mse": 0.2, "pearson": 0.8, "spearman": 0.7, "HasAns_total": 12}
    markdown = comparison_tables(scores, {"mse": 0.9}, "random init", "mse")
    first = markdown.split("\n\n")[0]
    assert "| mse * | 0.2 | 0.9 | -0.7 |" in first and "| pearson | 0.8 |  |  |" in first
    assert "HasAns_total" not in first and "| HasAns_total | 12 |  |" in markdown


def test_the_console_summary_starts_on_its_own_line() -> None:
    # Issue 37: the first bullet was glued to Prefect's "... | INFO | Flow run 'x' - " prefix.
    verdict = "**Overfitting** (held-out well short of training):\n\n- NSP: 0.99 ..."
    text = console_summary(verdict, {"report": "runs/demo/report.md", "encoder": "e/final"})
    assert text.startswith("\nOverfitting (held-out well short of training):\n\n- NSP")
    assert "**" not in text
    assert text.endswith("report:  runs/demo/report.md\nencoder: e/final")


def test_an_unreadable_weights_file_leaves_the_size_out(tmp_path: Path) -> None:
    (tmp_path / "entity_embeddings.safetensors").write_bytes(b"")
    assert parameter_count(tmp_path) is None
    assert model_description(tmp_path, "kg_embeddings") == f"{tmp_path.name} (kg_embeddings)"


def test_pretraining_metrics_run_down_the_rows_at_four_steps() -> None:
    from flows.artifacts import metrics_by_step

    records = [
        {"step": s, "loss": 10.0 / s, "mlm/loss": 9.0 / s, "lr": 1e-4, "epoch": 0, "note": "x"}
        for s in range(5, 105, 5)
    ]
    lines = metrics_by_step(records).splitlines()
    assert lines[0] == "| metric | step 5 | step 35 | step 70 | step 100 |"
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| loss",
        "| mlm/loss",
        "| epoch",
        "| lr",
    ]
    assert lines[2] == "| loss | 2 | 0.2857 | 0.1429 | 0.1 |"
    assert metrics_by_step(records[:2]).splitlines()[0] == "| metric | step 5 | step 10 |"
    assert metrics_by_step([]) == "No metrics were logged."
