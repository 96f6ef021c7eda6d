"""K-BERT with kbert.peft: only the adapter and the head train on kbert.init_from's frozen
encoder, final/ holds just those beside a pointer to it and reloads to the same model, and
a killed run resumes bit for bit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

import ptm_knowledge.kbert.finetune as kbert_finetune
from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel
from ptm_core.peft import PeftConfig, attach_peft
from ptm_core.peft.attach import is_adapter_tensor
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training.metrics import MetricsLog
from ptm_knowledge.kbert.finetune import load_kbert_classifier

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small 'pre-trained' BERT folder with the sample vocabulary."""
    path = tmp_path_factory.mktemp("base") / "final"
    vocab = ROOT / "data_specs/text_corpus/sample-vocab.txt"
    tokenizer = WordPieceTokenizer.from_vocab(vocab, lowercase=True)
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=2, num_heads=2,
        intermediate_size=48, max_positions=96,
    )  # fmt: skip
    encoder.save_pretrained(path, tokenizer=tokenizer)
    return path


def run(base: Path | None, out: Path, method: str, *, steps: int = 6, **trainer: Any) -> Any:
    cfg = compose_config(
        [
            "experiment=kbert_tiny_cls",
            *([f"kbert.init_from={base}"] if base else []),
            f"kbert.peft={method}",
            "kbert.peft_r=4",
            "kbert.peft_virtual_tokens=3",
            f"trainer.max_steps={steps}",
            "trainer.log_every=1",
            "trainer.learning_rate=1e-2",
            "trainer.progress=false",
            "trainer.device=cpu",
            f"trainer.output_dir={out}",
            *(f"trainer.{k}={v}" for k, v in trainer.items()),
        ]
    )
    return run_composed(cfg)


@pytest.mark.parametrize("method", ["lora", "ia3", "prompt", "prefix"])
def test_only_the_adapter_and_head_train_and_final_reloads(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    seen: dict[str, Any] = {}

    def spy(model: TaskModel, config: PeftConfig) -> TaskModel:
        attach_peft(model, config)
        seen["model"] = model
        seen["before"] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    monkeypatch.setattr(kbert_finetune, "attach_peft", spy)
    result = run(base, tmp_path / "run", method)
    model, before = seen["model"], seen["before"]
    after = model.state_dict()
    adapter = [k for k in after if is_adapter_tensor(k)]
    frozen = [k for k in after if not k.startswith("head.") and k not in adapter]
    assert adapter and frozen
    assert all(torch.equal(after[k], before[k]) for k in frozen)  # the base is untouched
    assert any(not torch.equal(after[k], before[k]) for k in adapter)
    assert any(not torch.equal(after[k], before[k]) for k in after if k.startswith("head."))
    assert 0 < result.final_metrics["parameters/trainable_share"] < 0.3

    final = result.encoder_dir
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task_head.safetensors", "task.json"} <= names
    assert "model.safetensors" not in names
    sizes = [sum(p.stat().st_size for p in d.glob("*.safetensors")) for d in (final, base)]
    assert sizes[0] * 4 < sizes[1]
    record = json.loads((final / "task.json").read_text())
    assert record["recipe"] == "kbert" and record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(base.resolve())

    loaded, config = load_kbert_classifier(final)
    assert config["visible_matrix"] == "on" and config["kg"] == "full"
    reloaded = loaded.state_dict()
    assert reloaded.keys() == after.keys()
    assert all(torch.equal(reloaded[k], after[k]) for k in after)


def test_an_adapter_without_init_from_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"kbert.peft=lora .*give kbert.init_from="):
        run(None, tmp_path / "run", "lora", steps=1)
    with pytest.raises(ValueError, match=r"^kbert.peft: unknown method 'lorra'"):
        run(None, tmp_path / "run", "lorra", steps=1)


def test_crash_and_resume_is_bit_identical(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    straight = run(base, tmp_path / "straight", "lora", steps=8, save_every=4)
    forward = TaskModel.forward
    calls = {"n": 0}

    def crashing(self: TaskModel, batch: dict[str, torch.Tensor]):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(TaskModel, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run(base, tmp_path / "killed", "lora", steps=8, save_every=4)
    monkeypatch.setattr(TaskModel, "forward", forward)
    resumed = run(base, tmp_path / "killed", "lora", steps=8, save_every=4)
    for name in ("adapter.safetensors", "task_head.safetensors"):
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8
