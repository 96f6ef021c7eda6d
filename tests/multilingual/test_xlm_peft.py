"""XLM zero-shot fine-tuning with xlm_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the XLM folder and reloads to the same model,
and a killed run resumes bit for bit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from test_xlm_finetune import xlm_dir  # noqa: F401 (the fixture)

import ptm_multilingual.finetune as xlm_finetune
from flows import runner
from flows.config import compose_config
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.peft.attach import is_adapter_tensor
from ptm_core.training.metrics import MetricsLog
from ptm_multilingual.finetune import XLMClassifier, load_xlm_classifier


def run(base: Path, out: Path, method: str, *extra: str, steps: int = 6) -> Any:
    cfg = compose_config(
        [
            "experiment=xlm_zero_shot",
            f"init_from={base}",
            f"xlm_finetune.peft={method}",
            "xlm_finetune.peft_r=4",
            "xlm_finetune.peft_virtual_tokens=3",
            "xlm_finetune.batch_size=8",
            f"trainer.max_steps={steps}",
            "trainer.log_every=1",
            "trainer.learning_rate=1e-2",
            f"trainer.output_dir={out}",
            "trainer.device=cpu",
            "trainer.progress=false",
            *extra,
        ]
    )
    return runner.run(cfg)


@pytest.mark.parametrize("method", ["lora", "ia3", "prefix"])
def test_only_the_adapter_and_head_train_and_final_reloads(
    xlm_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
) -> None:
    seen: dict[str, Any] = {}

    def spy(model: XLMClassifier, config: PeftConfig) -> XLMClassifier:
        attach_peft(model, config)
        seen["before"] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    monkeypatch.setattr(xlm_finetune, "attach_peft", spy)
    result = run(xlm_dir, tmp_path / "run", method)
    before, after = seen["before"], result.model.state_dict()
    adapter = [k for k in after if is_adapter_tensor(k)]
    frozen = [k for k in after if not k.startswith("head.") and k not in adapter]
    assert adapter and "encoder.lang_embeddings.weight" in frozen
    assert all(torch.equal(after[k], before[k]) for k in frozen)  # the base is untouched
    assert any(not torch.equal(after[k], before[k]) for k in adapter)
    assert any(not torch.equal(after[k], before[k]) for k in after if k.startswith("head."))

    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task_head.safetensors", "task.json"} <= names
    assert "model.safetensors" not in names
    sizes = [sum(p.stat().st_size for p in d.glob("*.safetensors")) for d in (final, xlm_dir)]
    assert sizes[0] * 4 < sizes[1]
    record = json.loads((final / "task.json").read_text())
    assert record["family"] == "xlm" and record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(xlm_dir.resolve())
    loaded, _, _ = load_xlm_classifier(final)
    reloaded = loaded.state_dict()
    assert reloaded.keys() == after.keys()
    assert all(torch.equal(reloaded[k], after[k]) for k in after)


def test_what_an_adapter_cannot_do_is_one_line(xlm_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(ValueError, match=r"^xlm_finetune.peft=prompt is not supported: .*lora"):
        run(xlm_dir, tmp_path / "a", "prompt", steps=1)
    with pytest.raises(ValueError, match=r"^xlm_finetune.peft=lora .*set xlm_finetune.freeze=none"):
        run(xlm_dir, tmp_path / "b", "lora", "xlm_finetune.freeze=embeddings", steps=1)
    with pytest.raises(ValueError, match=r"^xlm_finetune.peft: unknown method 'lorra'"):
        run(xlm_dir, tmp_path / "c", "lorra", steps=1)


def test_crash_and_resume_is_bit_identical(
    xlm_dir: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = "trainer.save_every=4"
    straight = run(xlm_dir, tmp_path / "straight", "lora", every, steps=8)
    forward = XLMClassifier.forward
    calls = {"n": 0}

    def crashing(self: XLMClassifier, batch: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(XLMClassifier, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run(xlm_dir, tmp_path / "killed", "lora", every, steps=8)
    monkeypatch.setattr(XLMClassifier, "forward", forward)
    resumed = run(xlm_dir, tmp_path / "killed", "lora", every, steps=8)
    for name in ("adapter.safetensors", "task_head.safetensors"):
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8
