"""The fine-tuning label report: confusion matrix and per-label scores, readable with many
labels, on generated tasks (not the samples: other labels, a label never seen in dev)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from PIL import Image

from flows.finetune import run_one
from flows.label_report import (
    OTHER,
    TOP_K,
    folded_matrix,
    label_report_markdown,
    plot_label_report,
    read_label_scores,
    shown_labels,
)

QUICK = ["model.num_layers=1", "trainer.progress=false", "trainer.log_every=2"]
WORDS = [f"w{i}" for i in range(70)]


def _vocab(path: Path) -> Path:
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    return path


def _classification(root: Path, labels: int = 57) -> list[str]:
    """A TSV task of ``labels`` classes: class k is mostly word k; the last class is in
    train only (a label the dev set never has)."""
    rng = random.Random(3)
    root.mkdir(parents=True, exist_ok=True)
    for split, rows in (("train", 3 * labels), ("dev", 2 * labels)):
        kept = labels if split == "train" else labels - 1
        lines = ["sentence\tlabel"]
        for i in range(rows):
            k = i % kept
            noise = " ".join(rng.choices(WORDS, k=3))
            lines.append(f"{WORDS[k]} {noise}\tlabel_{k:02d}")
        (root / f"{split}.tsv").write_text("\n".join(lines) + "\n")
    return [
        "task=sentiment",
        f"task.train={root / 'train.tsv'}",
        f"task.dev={root / 'dev.tsv'}",
        f"tokenizer={_vocab(root / 'vocab.txt')}",
    ]


def _scores(labels: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    confusion = [[0] * labels for _ in range(labels)]
    for i in range(labels - 1):  # the last label has no dev example
        for _ in range(rng.randint(3, 12)):
            j = i if rng.random() < 0.6 else rng.randrange(labels)
            confusion[i][j] += 1
    from ptm_core.finetune.label_scores import _row

    names = [f"type_{i:02d}" for i in range(labels)]
    return {
        "kind": "classification",
        "labels": names,
        "confusion": confusion,
        "unit": "examples",
        "per_label": [_row(names[i], confusion, i) for i in range(labels)],
        "per_label_unit": "examples",
    }


def test_a_large_label_set_keeps_the_labels_with_most_errors() -> None:
    scores = _scores(60)
    keep = shown_labels(scores["labels"], scores["confusion"], TOP_K)
    assert len(keep) == TOP_K and keep == sorted(keep)
    matrix, folded = folded_matrix(scores["confusion"], keep)
    assert folded and len(matrix) == TOP_K + 1
    # Nothing is lost: the folded matrix counts every example.
    assert sum(map(sum, matrix)) == sum(map(sum, scores["confusion"]))
    size = len(scores["labels"])
    errors = [
        sum(scores["confusion"][i][j] + scores["confusion"][j][i] for j in range(size) if j != i)
        for i in range(size)
    ]
    assert min(errors[i] for i in keep) >= max(errors[i] for i in range(size) if i not in keep)
    small = _scores(6)
    assert shown_labels(small["labels"], small["confusion"], TOP_K) == list(range(6))
    assert folded_matrix(small["confusion"], range(6))[1] is False


@pytest.mark.parametrize("labels", [4, 60])
def test_the_figure_stays_readable(labels: int, tmp_path: Path) -> None:
    scores = _scores(labels)
    png = plot_label_report(scores, tmp_path / "labels.png")
    width, height = Image.open(png).size
    # At most TOP_K + "other" rows: 60 labels draw no larger than about 20 would.
    assert 500 <= width <= 900 and 500 <= height <= 1700, (width, height)
    markdown = label_report_markdown(scores, png)
    table = [line for line in markdown.splitlines() if line.startswith("| ")]
    assert table[0] == "| label | P | R | F1 | n |"
    assert len(table) - 1 == min(labels, TOP_K)
    assert "![confusion matrix and per-label scores](data:image/png;base64," in markdown
    assert f"No dev example of: type_{labels - 1:02d}" in markdown
    if labels > TOP_K:
        assert f"The {TOP_K} labels with the lowest F1 of {labels}" in markdown


@pytest.mark.integration
def test_finetuning_writes_the_label_report_for_a_generated_task(tmp_path: Path) -> None:
    task = _classification(tmp_path / "task")
    run = run_one([*task, *QUICK, "trainer.max_steps=4", f"trainer.output_dir={tmp_path / 'r'}"])
    png = Path(run["label_report"])
    assert png == tmp_path / "r" / "label_report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    scores = read_label_scores(tmp_path / "r")
    assert scores is not None and len(scores["labels"]) == 57
    assert sum(map(sum, scores["confusion"])) == 2 * 57  # every dev example
    unseen = next(r for r in scores["per_label"] if r["label"] == "label_56")
    assert unseen["support"] == 0 and unseen["recall"] is None
    accuracy = sum(scores["confusion"][i][i] for i in range(57)) / (2 * 57)
    assert accuracy == pytest.approx(run["final_metrics"]["dev/accuracy"])
    assert OTHER not in json.dumps(scores)  # folding is the figure's, not the data's


@pytest.mark.integration
def test_a_tagging_run_reports_entity_types(tmp_path: Path) -> None:
    root = tmp_path / "task"
    root.mkdir()
    rng = random.Random(5)
    for split, rows in (("train", 30), ("dev", 12)):
        sentences = []
        for i in range(rows):
            words = [f"{w} -X- -X- O" for w in rng.choices(WORDS[10:], k=4)]
            words.insert(1, f"{WORDS[i % 3]} -X- -X- B-{('ANIMAL', 'TOOL', 'PLANT')[i % 3]}")
            if split == "train" and i % 5 == 0:
                words.append(f"{WORDS[5]} -X- -X- B-COLOUR")  # never in dev
            sentences.append("\n".join(words))
        (root / f"{split}.txt").write_text("\n\n".join(sentences) + "\n")
    overrides = [
        "task=kg_ner",
        f"task.train={root / 'train.txt'}",
        f"task.dev={root / 'dev.txt'}",
        f"tokenizer={_vocab(root / 'vocab.txt')}",
        *QUICK,
        "trainer.max_steps=4",
        f"trainer.output_dir={tmp_path / 'r'}",
    ]
    run = run_one(overrides)
    assert Path(run["label_report"]).exists()
    scores = read_label_scores(tmp_path / "r")
    assert scores is not None and scores["unit"] == "words"
    assert sum(map(sum, scores["confusion"])) == 12 * 5  # every dev word
    rows = {r["label"]: r for r in scores["per_label"]}
    assert sorted(rows) == ["ANIMAL", "COLOUR", "PLANT", "TOOL"]
    assert rows["COLOUR"]["support"] == 0 and rows["COLOUR"]["f1"] is None
    assert rows["TOOL"]["support"] == 4
