"""Collapsed fine-tuning runs are warned about in the log and the result (#31, item 17)."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.collapse import collapse_warnings, prior_loss
from ptm_core.finetune.recipe import FinetuneResult, finetune
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig


@dataclass
class Row:
    label: int | float | None = None
    tags: list[int] | None = None


def _curve(values: list[float], every: int = 10) -> list[dict[str, float | int]]:
    return [{"step": every * (i + 1), "loss": v} for i, v in enumerate(values)]


def test_the_prior_of_four_balanced_classes_is_ln_4() -> None:
    prior = prior_loss([Row(label=i % 4) for i in range(400)])
    assert prior is not None and math.isclose(prior.value, math.log(4))
    skewed = prior_loss([Row(label=0)] * 90 + [Row(label=1)] * 10)
    assert skewed is not None
    assert math.isclose(skewed.value, -(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
    tags = prior_loss([Row(tags=[0, 0, 0, 1]), Row(tags=[0, 0, 0, 2])])
    assert tags is not None and math.isclose(
        tags.value, -(0.75 * math.log(0.75) + 2 * 0.125 * math.log(0.125))
    )
    values = prior_loss([Row(label=1.0), Row(label=3.0)])
    assert values is not None and math.isclose(values.value, 1.0)
    assert prior_loss([Row()]) is None and prior_loss([]) is None


def test_a_loss_that_stays_at_the_prior_is_warned_about() -> None:
    prior = prior_loss([Row(label=i % 4) for i in range(40)])
    stuck = _curve([1.45, 1.39, 1.387, 1.385, 1.388, 1.386, 1.384, 1.389])
    (message,) = collapse_warnings(stuck, prior)
    assert "steps 61-80" in message and "1.3863" in message and "entropy" in message, message
    learning = _curve([1.45, 1.2, 0.9, 0.6, 0.4, 0.3, 0.25, 0.2])
    assert collapse_warnings(learning, prior) == []
    # Near the prior early but far below it at the end: not collapsed.
    assert collapse_warnings(_curve([1.386] * 6 + [0.9, 0.8]), prior) == []


def test_one_class_predictions_are_warned_about_with_the_class_name() -> None:
    (message,) = collapse_warnings([], None, [2, 2, 2, 2, 2], label_names=["a", "b", "sports"])
    assert "all 5 dev predictions are 'sports' (class 2)" in message
    (tags,) = collapse_warnings([], None, [["O", "O"], ["O"]])
    assert "all 3 dev predictions are 'O'" in tags
    assert collapse_warnings([], None, [0, 1, 2]) == []
    assert collapse_warnings([], None, [1.5, 1.5]) == []  # regression values
    assert collapse_warnings([], None, {"q1": "x", "q2": "x"}) == []  # QA answers


WORDS = ["lorry", "heron", "cello", "tractor", "otter", "oboe", "ferry", "badger", "harp"]


def _write_task(directory: Path, rows: int, seed: int, *, classes: int, learnable: bool) -> Path:
    """A GLUE TSV of this test's own words; the label is the first word's index mod
    ``classes`` when ``learnable``, else drawn apart from the text."""
    rng = random.Random(seed)
    lines = ["sentence\tlabel"]
    for _ in range(rows):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        label = WORDS.index(words[0]) % classes if learnable else rng.randrange(classes)
        lines.append(f"{' '.join(words)}\t{label}")
    path = directory / f"rows{seed}.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _finetune(
    tmp_path: Path, *, learnable: bool, classes: int, **settings: object
) -> FinetuneResult:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
    )
    task = TaskSpec(
        name="mine",
        kind="classification",
        train=str(_write_task(tmp_path, 400, 1, classes=classes, learnable=learnable)),
        dev=str(_write_task(tmp_path, 40, 2, classes=classes, learnable=learnable)),
        max_length=16,
        batch_size=32,
    )
    config: dict[str, Any] = {
        "output_dir": str(tmp_path / "run"),
        "max_steps": 24,
        "learning_rate": 1e-3,
        "warmup_steps": 0,
        "progress": False,
        "device": "cpu",
        "log_every": 4,
        "save_every": 24,
        **settings,
    }
    return finetune(task, encoder=encoder, tokenizer=tokenizer, trainer=TrainerConfig(**config))


def test_a_real_run_that_learns_nothing_sits_at_ln_4_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with caplog_at_warning() as records:
        result = _finetune(tmp_path, learnable=False, classes=4)
    warnings = result.final_metrics.get("warnings")
    assert warnings and "label prior" in warnings[0] and "4 classes" in warnings[0], warnings
    saved = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert saved["warnings"] == warnings
    assert "warning: collapsed run" in capsys.readouterr().out
    assert any("collapsed run" in r.getMessage() for r in records)


@pytest.mark.stress
def test_a_real_run_at_a_far_too_high_learning_rate_predicts_one_class(tmp_path: Path) -> None:
    result = _finetune(
        tmp_path, learnable=True, classes=3, learning_rate=1.0, max_grad_norm=None, max_steps=30
    )
    warnings = result.final_metrics.get("warnings", [])
    assert any("dev predictions are" in w for w in warnings), result.final_metrics


class caplog_at_warning:
    """Collects ``ptm_core.finetune`` warnings (the flows forward them to Prefect's log)."""

    def __enter__(self) -> list:
        import logging

        self.records: list = []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.records.append  # type: ignore[method-assign]
        logging.getLogger("ptm_core.finetune").addHandler(self.handler)
        return self.records

    def __exit__(self, *exc: object) -> None:
        import logging

        logging.getLogger("ptm_core.finetune").removeHandler(self.handler)
