"""Generated image-text data for the multimodal families' contract cases (not the samples):
synthetic scenes as pairs + region features, and the fine-tuning tasks on other scenes."""

from __future__ import annotations

from pathlib import Path

from ptm_multimodal.synthetic import write_synthetic_dataset, write_synthetic_tasks


def write_pairs(directory: Path) -> tuple[Path, Path]:
    """``(train, eval)`` image-text pair folders of a few generated scenes each."""
    train = write_synthetic_dataset(directory / "train", 24, seed=5)
    held_out = write_synthetic_dataset(directory / "eval", 8, seed=6)
    return Path(train), Path(held_out)


def pretrain_overrides(experiment: str, tmp_path: Path) -> list[str]:
    """A two-step ``experiment`` run on generated pairs, under ``tmp_path``."""
    train, held_out = write_pairs(tmp_path / "data")
    return [
        f"experiment={experiment}",
        f"data.train_dir={train}",
        f"data.eval_dir={held_out}",
        f"data.corpus={held_out / 'pairs.jsonl'}",
        "data.batch_size=4",
        "trainer.max_steps=2",
        "trainer.save_every=2",
        "trainer.device=cpu",
        f"trainer.output_dir={tmp_path / 'run'}",
    ]


def staged_pretrain_overrides(experiment: str, tmp_path: Path) -> list[str]:
    """A two-step run of a two-stage ``experiment`` (``data.stages``: one step on generated
    weakly-supervised pairs, 30% of whose captions are another scene's, then one on clean
    ones), under ``tmp_path``."""
    clean, _ = write_pairs(tmp_path / "data")
    weak = write_synthetic_dataset(tmp_path / "data" / "weak", 24, seed=7, caption_noise=0.3)
    single = pretrain_overrides(experiment, tmp_path)
    return [
        *(o for o in single if not o.startswith("data.train_dir=")),
        f"data.stages.0.train_dir={weak}",
        "data.stages.0.steps=1",
        f"data.stages.1.train_dir={clean}",
        "data.stages.1.steps=1",
    ]


def finetune_overrides(experiment: str, tmp_path: Path, final_dir: Path) -> list[str]:
    """A two-step ``experiment`` fine-tune of ``final_dir`` on a generated VQA task."""
    tasks = write_synthetic_tasks(tmp_path / "tasks", train_images=8, dev_images=6, seed=21)
    return [
        f"experiment={experiment}",
        f"init_from={final_dir}",
        f"multimodal_finetune.task.train={tasks / 'vqa_train.jsonl'}",
        f"multimodal_finetune.task.dev={tasks / 'vqa_dev.jsonl'}",
        "multimodal_finetune.task.batch_size=4",
        "trainer.max_steps=2",
        "trainer.save_every=2",
        "trainer.device=cpu",
        f"trainer.output_dir={tmp_path / 'run'}",
    ]
