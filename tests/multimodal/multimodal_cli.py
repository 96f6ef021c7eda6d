"""A short `ptm pretrain experiment=<family>_vqa_tiny` on generated VQA tasks, for the
multimodal CLI tests."""

from __future__ import annotations

import json
from pathlib import Path

from flows.cli import main
from ptm_multimodal.synthetic import write_synthetic_tasks


def finetune_vqa_briefly(experiment: str, final_dir: Path, tmp_path: Path) -> Path:
    """Fine-tune ``final_dir`` for 4 steps (backbone frozen) on a generated VQA task; check
    its dev VQA accuracy is a rate and return the run folder (``tmp_path/vqa``)."""
    tasks = write_synthetic_tasks(tmp_path / "tasks", train_images=8, dev_images=6, seed=21)
    tuned = tmp_path / "vqa"
    argv = [
        "pretrain",
        f"experiment={experiment}",
        f"init_from={final_dir}",
        f"multimodal_finetune.task.train={tasks / 'vqa_train.jsonl'}",
        f"multimodal_finetune.task.dev={tasks / 'vqa_dev.jsonl'}",
        "multimodal_finetune.task.batch_size=8",
        "multimodal_finetune.freeze_backbone=true",
        "trainer.max_steps=4",
        "trainer.save_every=4",
        "trainer.progress=false",
        "trainer.device=cpu",
        f"trainer.output_dir={tuned}",
    ]
    assert main(argv) == 0
    scores = json.loads((tuned / "eval.json").read_text())
    assert 0.0 <= scores["dev/vqa_accuracy"] <= 1.0
    return tuned
