"""Prefect artifacts rendered in headless Chromium as the UI's artifact drawer shows them
(tools/artifact_panel.py): nothing wider than the panel, no table cut off."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from flows.artifacts import generalisation_report, markdown_table, png_data_uri
from flows.evaluation_report import comparison_tables
from flows.label_report import label_report_markdown, plot_label_report
from flows.pretrain import training_artifacts
from tools.artifact_panel import PANEL_WIDTH, chromium, measure, panel_html

if chromium() is None:
    if os.environ.get("CI") == "true":
        pytest.fail(
            "chromium is not installed: .ci/run installs it with apt (apt-get install -y "
            "chromium); the artifact-panel tests need it on CI",
            pytrace=False,
        )
    pytest.skip("chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

# What a tiny ERNIE-THU run logs: losses, accuracies and the system figures.
RECORDS = [
    {
        "step": s,
        "loss": 9.0 / s**0.3,
        "mlm/loss": 8.0 / s**0.3,
        "nsp/loss": 0.7 / s**0.2,
        "dea/loss": 3.0 / s**0.4,
        "mlm/accuracy": 0.01 * s**0.5,
        "nsp/accuracy": 0.5,
        "dea/accuracy": 0.02 * s**0.5,
        "lr": 1e-4,
        "grad_norm": 1.5,
        "epoch": s // 100,
        "data_wait_share": 0.02,
        "tokens_per_second": 12345.6,
    }
    for s in range(10, 310, 10)
]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("run")
    metrics = out / "metrics.jsonl"
    metrics.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    summary = {
        "experiment": "ernie_thu_tiny",
        "output_dir": str(out),
        "encoder_dir": str(out / "final"),
        "last_checkpoint": str(out / "checkpoints" / "step_000300"),
        "metrics_path": str(metrics),
    }
    return training_artifacts(summary)


def test_the_old_loss_curve_image_artifact_overflows_the_panel(run: dict, tmp_path: Path) -> None:
    # What ptm published before: create_image_artifact(image_url=<the PNG as a data URL>).
    # Prefect prints the URL under the image: one unbreakable line, far wider than 640 px.
    old = measure("image", png_data_uri(run["png"]), tmp_path)
    assert old.client_width == PANEL_WIDTH
    assert old.scroll_width > 10 * PANEL_WIDTH and not old.fits


def test_the_old_metrics_table_has_its_right_columns_cut_off(tmp_path: Path) -> None:
    columns = ["step", *sorted(k for k in RECORDS[-1] if k != "step")]
    old = measure("markdown", markdown_table(RECORDS[::3], columns), tmp_path)
    assert old.clipped_tables == 1 and not old.fits


@pytest.mark.parametrize("key", ["pretraining-metrics", "pretraining-loss-curve"])
def test_the_pretraining_artifacts_fit(run: dict, key: str, tmp_path: Path) -> None:
    found = measure("markdown", run[key], tmp_path)
    assert found.fits, found


def test_the_demo_and_evaluation_reports_fit(tmp_path: Path) -> None:
    # The numbers of a `make demo` run (2026-11-29): six columns of them and a name as
    # long as dea/corrupted_accuracy overflowed the table at 4 significant digits.
    train = {"loss": 9.332, "mlm/accuracy": 0.06544, "mlm/loss": 6.26, "nsp/accuracy": 0.4808,
             "nsp/loss": 2.613, "dea/accuracy": 0.9199, "dea/corrupted_accuracy": 0.8274,
             "dea/loss": 0.4592, "dea/chance": 0.07044, "dea/candidates": 19.0,
             "dea/corrupted": 5.0, "dea/mentions": 26.43, "mlm/predictions": 245.0}  # fmt: skip
    logged = {**train, "loss": 6.027, "nsp/accuracy": 1.0, "nsp/loss": 0.00556,
              "dea/corrupted_accuracy": 0.9278, "mlm/accuracy": 0.0857}  # fmt: skip
    held = {**train, "loss": 10.3, "mlm/accuracy": 0.05497, "nsp/accuracy": 0.5938,
            "dea/corrupted_accuracy": 0.1705, "mlm/predictions": 169.0}  # fmt: skip
    random_init = {**held, "mlm/accuracy": 0.002033, "nsp/accuracy": 0.3021,
                   "dea/corrupted_accuracy": 0.09091, "dea/loss": 3.167}  # fmt: skip
    demo = generalisation_report(train, held, logged=logged, baseline=random_init)
    evaluation = comparison_tables(held, random_init, "random init", "dea/accuracy")
    for markdown in (demo, evaluation):
        found = measure("markdown", markdown, tmp_path)
        assert found.fits, (found, markdown)


@pytest.mark.parametrize("labels", [3, 60])
def test_the_label_report_fits(labels: int, tmp_path: Path) -> None:
    names = [f"category_{i:02d}" for i in range(labels)]
    confusion = [[(5 if i == j else (i * j) % 3) for j in range(labels)] for i in range(labels)]
    per_label = [
        {"label": n, "precision": 0.5, "recall": 0.4, "f1": 0.444, "support": sum(confusion[i])}
        for i, n in enumerate(names)
    ]
    scores = {"kind": "classification", "labels": names, "confusion": confusion,
              "unit": "examples", "per_label": per_label, "per_label_unit": "examples"}  # fmt: skip
    png = plot_label_report(scores, tmp_path / "labels.png")
    found = measure("markdown", label_report_markdown(scores, png), tmp_path)
    assert found.fits, found


def test_the_page_uses_prefects_own_stylesheet() -> None:
    page = panel_html("markdown", "| a | b |\n|---|---|\n| 1 | 2 |")
    assert ".markdown-renderer__table{" in page and 'class="markdown-renderer__table' in page
    with pytest.raises(ValueError, match="artifact kind 'table'"):
        panel_html("table", "")


def test_the_finetune_summary_fits_where_the_wide_table_was_cut_off(tmp_path: Path) -> None:
    from flows.finetune import format_summary, summary_markdown

    metrics = ("accuracy", "f1", "f1_macro", "matthews_corrcoef", "loss")
    rows = [
        {
            "setting": f"task=sentiment model.num_layers=1 trainer.learning_rate={lr}",
            "seeds": 3,
            **{f"dev/{k}": {"mean": 0.5, "std": 0.01, "n": 3} for k in metrics},
        }
        for lr in ("3e-5", "1e-4")
    ]
    old = measure("markdown", "# Fine-tuning\n\n" + format_summary(rows) + "\n", tmp_path)
    assert old.clipped_tables == 1
    new = measure("markdown", summary_markdown(rows), tmp_path)
    assert new.fits, new
