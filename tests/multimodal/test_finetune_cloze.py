"""The cloze answer head (VisualBERT VQA): MLM parity at init, save/load, a few steps."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.objectives import MaskedLMObjective
from ptm_core.training import TrainerConfig
from ptm_multimodal import ImageTextMatchObjective, visualbert
from ptm_multimodal.finetune import finetune_image_text, predict_image_text
from ptm_multimodal.region_features import read_region_features
from ptm_multimodal.task_data import ImageTextFeaturizer, read_image_text_task
from ptm_multimodal.task_io import load_image_text_task_model
from ptm_multimodal.task_model import (
    ClozeAnswerHead,
    ImageTextTaskModel,
    answer_token_ids,
    build_task_head,
    load_backbone,
)
from ptm_multimodal.task_spec import ImageTextTask

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "data_specs" / "image_text" / "tasks"
SAMPLE = ROOT / "data_specs" / "image_text" / "sample"
SMALL = {"hidden_size": 16, "num_layers": 1, "num_heads": 2, "intermediate_size": 32}


def _trainer(out: Path, steps: int = 3) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(out), max_steps=steps, learning_rate=1e-3, progress=False, save_every=100
    )


@pytest.fixture(scope="module")
def final(tmp_path_factory: pytest.TempPathFactory, pretrain: Callable[..., Any]) -> Path:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("pretrained")
    result = pretrain(
        "visualbert",
        partial(visualbert, max_positions=32, **SMALL),
        {"mlm": MaskedLMObjective, "itm": ImageTextMatchObjective},
        _trainer(root / "visualbert", 2),
        train_dir=str(SAMPLE),
        eval_dir=str(SAMPLE),
        batch_size=8,
        prepare=False,
    )
    return result.encoder_dir


def _task() -> ImageTextTask:
    return ImageTextTask(
        name="test-cloze",
        kind="vqa",
        train=str(TASKS / "vqa_train.jsonl"),
        dev=str(TASKS / "vqa_dev.jsonl"),
        max_length=16,
        batch_size=8,
    )


def test_cloze_head_starts_as_the_pretrained_mlm_head(final: Path) -> None:
    backbone, tokenizer, objectives = load_backbone(final)
    features = read_region_features(TASKS)
    rows, names = read_image_text_task(TASKS / "vqa_dev.jsonl", "vqa", features)
    head = build_task_head(backbone, len(names), head="cloze")
    assert isinstance(head, ClozeAnswerHead)
    ids = answer_token_ids(tokenizer, names)
    head.init_from_mlm(objectives["mlm"].head, ids)  # type: ignore[union-attr,arg-type]
    model = ImageTextTaskModel(backbone, head, "vqa", names).eval()
    batch = ImageTextFeaturizer(tokenizer, features, "vqa", names, 16, answer_slot=True).featurize(
        rows[:6]
    )
    # the slot is a [MASK] right before the final [SEP]
    positions = batch["answer_positions"]
    picked = batch["input_ids"][torch.arange(6), positions]
    assert picked.tolist() == [tokenizer.vocab_info.mask_id] * 6
    after = batch["input_ids"][torch.arange(6), positions + 1]
    assert after.tolist() == [tokenizer.vocab_info.sep_id] * 6
    with torch.no_grad():
        logits = model(batch).logits
        hidden = backbone(
            batch["input_ids"],
            batch["visual_features"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            visual_boxes=batch["visual_boxes"],
            visual_mask=batch["visual_mask"],
        ).last_hidden_state
        mlm = objectives["mlm"].head(hidden[torch.arange(6), positions])  # type: ignore[union-attr,operator]
    torch.testing.assert_close(logits, mlm[:, ids], rtol=0, atol=1e-6)
    assert logits.shape == (6, len(names))


def test_cloze_finetune_saves_and_reloads_identical_logits(final: Path, tmp_path: Path) -> None:
    task = _task()
    result = finetune_image_text(
        task, init_from=final, trainer=_trainer(tmp_path / "run"), head="cloze"
    )
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["head"] == "cloze"
    assert record["head_from_pretraining"] == ["mlm.transform", "mlm.decoder[answers]"]
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    metrics, predictions = predict_image_text(result.encoder_dir)
    assert metrics["vqa_accuracy"] == pytest.approx(eval_json["dev/vqa_accuracy"], abs=1e-6)
    model, tokenizer, _, _ = load_image_text_task_model(result.encoder_dir)
    assert isinstance(model.head, ClozeAnswerHead) and set(predictions) <= set(model.label_names)
    features = read_region_features(TASKS)
    rows, names = read_image_text_task(task.dev, "vqa", features, label_names=model.label_names)
    batch = ImageTextFeaturizer(tokenizer, features, "vqa", names, 16, answer_slot=True).featurize(
        rows[:6]
    )
    again, *_ = load_image_text_task_model(result.encoder_dir)
    torch.testing.assert_close(model(batch).logits, again(batch).logits, rtol=0, atol=0)


def test_cloze_random_init_and_bad_head_name(final: Path, tmp_path: Path) -> None:
    result = finetune_image_text(
        _task(), init_from=final, trainer=_trainer(tmp_path / "r"), head="cloze", random_init=True
    )
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["head"] == "cloze" and record["head_from_pretraining"] == []
    backbone, _, _ = load_backbone(final)
    with pytest.raises(ValueError, match=r"multimodal_finetune\.head is 'pooled'"):
        build_task_head(backbone, 3, head="pooled")


def test_the_recipe_passes_the_head_switch(final: Path, tmp_path: Path) -> None:
    from flows import runner
    from flows.config import compose_config

    cfg = compose_config(
        [
            "experiment=visualbert_vqa_tiny",
            f"init_from={final}",
            "multimodal_finetune.head=cloze",
            "trainer.max_steps=2",
            "trainer.progress=false",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
    )
    result = runner.run(cfg)
    record = json.loads((result.encoder_dir / "task.json").read_text())
    assert record["head"] == "cloze"
