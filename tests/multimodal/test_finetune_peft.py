"""VisualBERT/ViLBERT with multimodal_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the pre-trained folder and reloads to the same
model; a prompt is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from test_finetune import _task, _trainer, pretrained  # noqa: F401 (the fixture)

import ptm_multimodal.finetune as mm_finetune
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.peft.attach import is_adapter_tensor
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
    seen: dict[str, Any] = {}

    def spy(model: ImageTextTaskModel, config: PeftConfig) -> ImageTextTaskModel:
        attach_peft(model, config)
        seen["model"] = model
        seen["before"] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    monkeypatch.setattr(mm_finetune, "attach_peft", spy)
    trainer = _trainer(tmp_path / "run", steps=4)
    trainer.learning_rate = 1e-2
    result = finetune_image_text(
        _task("classification"),
        init_from=pretrained[family],
        trainer=trainer,
        peft=PeftConfig(method=method, r=4, num_virtual_tokens=3),
    )
    model, before = seen["model"], seen["before"]
    after = model.state_dict()
    adapter = [k for k in after if is_adapter_tensor(k)]
    frozen = [k for k in after if not k.startswith("head.") and k not in adapter]
    assert adapter and frozen
    assert all(torch.equal(after[k], before[k]) for k in frozen)  # the base is untouched
    assert any(not torch.equal(after[k], before[k]) for k in adapter)
    assert any(not torch.equal(after[k], before[k]) for k in after if k.startswith("head."))

    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task_head.safetensors", "task.json"} <= names
    assert "model.safetensors" not in names
    base = pretrained[family]
    sizes = [sum(p.stat().st_size for p in d.glob("*.safetensors")) for d in (final, base)]
    assert sizes[0] * 2 < sizes[1]
    record = json.loads((final / "task.json").read_text())
    assert record["family"] == "multimodal" and record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(base.resolve())
    loaded, *_ = load_image_text_task_model(final)
    reloaded = loaded.state_dict()
    assert reloaded.keys() == after.keys()
    assert all(torch.equal(reloaded[k], after[k].cpu()) for k in after)
    metrics, _ = predict_image_text(final)
    eval_json = json.loads((result.output_dir / "eval.json").read_text())
    assert metrics["accuracy"] == eval_json["dev/accuracy"]


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
