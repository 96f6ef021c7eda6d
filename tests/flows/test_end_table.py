"""The end table of the long commands: aligned plain text, key metrics first, then outputs."""

from __future__ import annotations

import math
from pathlib import Path

from flows.end_table import end_table, format_value, key_metrics


def test_the_table_aligns_metrics_then_outputs_and_leaves_out_missing_paths() -> None:
    text = end_table(
        "finetune kg_pair",
        {"dev/accuracy": 0.823529, "examples": 1234},
        {"final model": Path("runs/x/final"), "checkpoint": None},
    )
    assert text.splitlines() == [
        "finetune kg_pair",
        "  metric        value",
        "  dev/accuracy  0.8235",
        "  examples      1,234",
        "  output        where",
        "  final model   runs/x/final",
    ]


def test_key_metrics_drop_speed_figures_and_lists() -> None:
    record = {
        "step": 20,
        "loss": 0.5,
        "lr": 1e-4,
        "tokens_per_s": 900.0,
        "data_wait_share": 0.1,
        "epoch": 3.0,
        "grad_norm": 0.7,
        "warnings": ["collapsed run"],
        "dev/f1": 0.6,
    }
    assert key_metrics(record) == {"dev/f1": 0.6, "loss": 0.5}


def test_values_read_at_a_glance() -> None:
    assert format_value(0.0) == "0.0000"
    assert format_value(2276.54261) == "2276.5426"
    assert format_value(1.5e-5) == "1.5e-05"
    assert format_value(math.nan) == "nan"
    assert format_value(True) == "True"
