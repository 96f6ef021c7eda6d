"""XLM zero-shot fine-tuning with xlm_finetune.peft: only the adapter and the head train,
final/ holds just those beside a pointer to the XLM folder and reloads to the same model,
and a killed run resumes bit for bit."""

from __future__ import annotations

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
from test_xlm_finetune import xlm_dir  # noqa: F401 (the fixture)

import ptm_multilingual.finetune as xlm_finetune
from flows import runner
from flows.config import compose_config
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
    seen = spy_on_attach(monkeypatch, xlm_finetune, "attach_peft")
    result = run(xlm_dir, tmp_path / "run", method)
    after = result.model.state_dict()
    assert_only_adapter_and_head_trained(seen["before"], after)
    assert not result.model.encoder.lang_embeddings.weight.requires_grad
    record = assert_adapter_folder(result.encoder_dir, xlm_dir, method)
    assert record["family"] == "xlm"
    loaded, _, _ = load_xlm_classifier(result.encoder_dir)
    assert_same_state(loaded, after)


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
    assert_resume_is_bit_identical(
        monkeypatch,
        XLMClassifier,
        lambda name: run(xlm_dir, tmp_path / name, "lora", "trainer.save_every=4", steps=8),
    )
