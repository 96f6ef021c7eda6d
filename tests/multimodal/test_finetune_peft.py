"""VisualBERT/ViLBERT with multimodal_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the pre-trained folder and reloads to the same
model, a killed run resumes bit for bit, and a prompt is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from peft_checks import (
    assert_adapter_folder,
    assert_only_adapter_and_head_trained,
    assert_resume_is_bit_identical,
    assert_same_state,
    spy_on_attach,
)
from test_finetune import _task, _trainer, pretrained  # noqa: F401 (the fixture)

import ptm_multimodal.finetune as mm_finetune
from ptm_core.peft import PeftConfig
from ptm_multimodal.finetune import finetune_image_text, predict_image_text
from ptm_multimodal.task_io import load_image_text_task_model
from ptm_multimodal.task_model import ImageTextTaskModel


@pytest.mark.parametrize(
    ("family", "method"),
    [("visualbert", "lora"), ("visualbert", "ia3"), ("visualbert", "prefix"), ("vilbert", "lora")],
)
def test_only_the_adapter_and_head_train_and_final_reloads(
    family: str,
    method: str,
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    seen = spy_on_attach(monkeypatch, mm_finetune, "attach_peft")
    trainer = _trainer(tmp_path / "run", steps=4)
    trainer.learning_rate = 1e-2
    result = finetune_image_text(
        _task("classification"),
        init_from=pretrained[family],
        trainer=trainer,
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
    )
    after = seen["model"].state_dict()
    assert_only_adapter_and_head_trained(seen["before"], after)
    final = result.encoder_dir
    record = assert_adapter_folder(final, pretrained[family], method, smaller=2)
    assert record["family"] == "multimodal"
    loaded, *_ = load_image_text_task_model(final)
    assert_same_state(loaded, after)
    metrics, _ = predict_image_text(final)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["accuracy"] == eval_json["dev/accuracy"]


def test_crash_and_resume_is_bit_identical(
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    def run(name: str) -> Any:
        trainer = _trainer(tmp_path / name, steps=8)
        trainer.save_every, trainer.log_every = 4, 1
        return finetune_image_text(
            _task("classification"),
            init_from=pretrained["visualbert"],
            trainer=trainer,
            peft=PeftConfig(method="lora", r=4),
        )

    assert_resume_is_bit_identical(monkeypatch, ImageTextTaskModel, run)


def test_prompt_and_frozen_backbone_are_refused_in_one_line(
    pretrained: dict[str, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    task, trainer = _task("classification"), _trainer(tmp_path / "run", steps=1)
    with pytest.raises(ValueError, match=r"^multimodal_finetune.peft=prompt is not supported"):
        finetune_image_text(
            task, init_from=pretrained["visualbert"], trainer=trainer, peft=PeftConfig("prompt")
        )
    with pytest.raises(ValueError, match=r"set freeze_backbone=false$"):
        finetune_image_text(
            task,
            init_from=pretrained["visualbert"],
            trainer=trainer,
            peft=PeftConfig("lora"),
            freeze_backbone=True,
        )
