"""`ptm evaluate` on a fine-tuned VisualBERT final/: the task's own metric (VQA accuracy) on
its dev file with its region features, against the same architecture from random init."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flows.evaluate import evaluate
from flows.evaluation import model_family
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_multimodal import visualbert
from ptm_multimodal.finetune import finetune_image_text
from ptm_multimodal.task_spec import ImageTextTask

TASKS = Path(__file__).resolve().parents[2] / "data_specs" / "image_text" / "tasks"


def test_evaluate_scores_a_finetuned_visualbert_with_its_task_metric(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(TASKS / "vocab.txt")
    torch.manual_seed(0)
    backbone = visualbert(
        vocab_size=tokenizer.vocab_size,
        visual_embedding_dim=32,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
    )
    task = ImageTextTask(
        name="vqa",
        kind="vqa",
        train=str(TASKS / "vqa_train.jsonl"),
        dev=str(TASKS / "vqa_dev.jsonl"),
        max_length=16,
        batch_size=8,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"), max_steps=3, learning_rate=1e-3, progress=False
    )
    result = finetune_image_text(task, backbone=backbone, tokenizer=tokenizer, trainer=trainer)
    final = str(result.encoder_dir)
    assert model_family(final) == "multimodal_task"
    report = evaluate(final, report_path=str(tmp_path / "report.md"))
    assert report["family"] == "multimodal_task" and report["metric"] == "vqa_accuracy"
    assert report["model"]["vqa_accuracy"] == pytest.approx(
        result.final_metrics["dev/vqa_accuracy"]
    )
    assert 0.0 <= report["baseline"]["vqa_accuracy"] <= 1.0
    assert "random init" in (tmp_path / "report.md").read_text()
