"""The progress display: plain periodic lines off a terminal, its settings and their errors."""

from __future__ import annotations

import io
import logging

import pytest

from ptm_core import progress as progress_module
from ptm_core.progress import (
    Progress,
    ProgressSettingError,
    format_duration,
    progress_mode,
    progress_seconds,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_come_once_per_period_with_count_rate_and_eta(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    monkeypatch.setenv("PTM_PROGRESS", "lines")
    monkeypatch.setenv("PTM_PROGRESS_SECONDS", "10")
    caplog.set_level(logging.INFO, logger="ptm_core.progress")
    with Progress("link", 100, "document") as progress:
        for _ in range(40):  # 4 documents a second for 10 s: one line, at the 10 s mark
            clock.now += 0.25
            progress.update()
        progress.set_status(mentions=12)
        for _ in range(20):
            clock.now += 0.25
            progress.update()
    lines = [r.getMessage() for r in caplog.records if r.name == "ptm_core.progress"]
    assert lines == [
        "link: 40/100 documents (40%), 4 documents/s, ETA 0:00:15",
        "link: 60/100 documents (60%), 4 documents/s, done in 0:00:15 (mentions 12)",
    ]


def test_slow_work_is_seconds_per_unit_and_unknown_totals_have_no_eta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    monkeypatch.setenv("PTM_PROGRESS", "off")
    progress = Progress("prepare", None, "shard")
    clock.now += 30
    progress.update(2)
    assert progress.line() == "prepare: 2 shards, 15 s/shard"


def test_a_resumed_count_is_not_in_the_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(progress_module.time, "perf_counter", clock)
    monkeypatch.setenv("PTM_PROGRESS", "lines")
    progress = Progress("train", 200, "step", initial=100)
    clock.now += 10
    progress.update(20)
    assert progress.line() == "train: 120/200 steps (60%), 2 steps/s, ETA 0:00:40"


def test_mode_follows_stderr_unless_the_variable_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PTM_PROGRESS", raising=False)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # a pipe or a log file: no TTY
    assert progress_mode() == "lines"
    monkeypatch.setenv("PTM_PROGRESS", "bar")
    assert progress_mode() == "bar"
    assert Progress("x", 3, enabled=False).mode == "off"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PTM_PROGRESS", "bars", r"PTM_PROGRESS='bars' .* auto, bar, lines, off"),
        ("PTM_PROGRESS_SECONDS", "ten", r"PTM_PROGRESS_SECONDS='ten' .* e\.g\. PTM_PROGRESS"),
        ("PTM_PROGRESS_SECONDS", "-1", r"number of seconds >= 0"),
    ],
)
def test_bad_settings_name_the_variable_and_the_fix(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ProgressSettingError, match=message):
        progress_mode() if name == "PTM_PROGRESS" else progress_seconds()


def test_durations_read_as_clock_times() -> None:
    assert format_duration(3725.2) == "1:02:05"
    assert format_duration(float("inf")) == "?"


def test_averaged_evaluation_counts_its_batches(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """average_metrics (ERNIE-THU's ``ptm evaluate``) reports batches done, and its means."""
    from types import SimpleNamespace

    import torch

    from ptm_core.evaluation.metrics import average_metrics

    class Batches:
        batches_per_epoch = 3

        def iter_batches(self, epoch: int, start: int = 0):  # type: ignore[no-untyped-def]
            for value in (1.0, 2.0, 6.0)[start:]:
                yield {"x": torch.tensor([value])}

    class Model(torch.nn.Module):
        def forward(self, batch):  # type: ignore[no-untyped-def]
            value = batch["x"].sum()
            return SimpleNamespace(loss=value, metrics={"twice": 2 * value})

    monkeypatch.setenv("PTM_PROGRESS", "lines")
    with caplog.at_level(logging.INFO, logger="ptm_core.progress"):
        metrics = average_metrics(Model(), Batches())
    assert metrics == {"loss": 3.0, "twice": 6.0}
    lines = [r.getMessage() for r in caplog.records if r.name == "ptm_core.progress"]
    assert any(line.startswith("evaluate: 3/3 batches (100%)") for line in lines), lines
