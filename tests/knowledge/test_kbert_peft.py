"""K-BERT with kbert.peft: only the adapter and the head train on kbert.init_from's frozen
encoder, final/ holds just those beside a pointer to it and reloads to the same model, and
a killed run resumes bit for bit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from peft_checks import (
    assert_adapter_folder,
    assert_only_adapter_and_head_trained,
    assert_resume_is_bit_identical,
    assert_same_state,
    spy_on_attach,
)

import ptm_knowledge.kbert.finetune as kbert_finetune
from flows.config import compose_config
from flows.runner import run_composed
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import TaskModel
from ptm_core.tokenization import WordPieceTokenizer
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
    seen = spy_on_attach(monkeypatch, kbert_finetune, "attach_peft")
    result = run(base, tmp_path / "run", method)
    after = seen["model"].state_dict()
    assert_only_adapter_and_head_trained(seen["before"], after)
    assert 0 < result.final_metrics["parameters/trainable_share"] < 0.3
    record = assert_adapter_folder(result.encoder_dir, base, method)
    assert record["recipe"] == "kbert"
    loaded, config = load_kbert_classifier(result.encoder_dir)
    assert config["visible_matrix"] == "on" and config["kg"] == "full"
    assert_same_state(loaded, after)


def test_an_adapter_without_init_from_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"kbert.peft=lora .*give kbert.init_from="):
        run(None, tmp_path / "run", "lora", steps=1)
    with pytest.raises(ValueError, match=r"^kbert.peft: unknown method 'lorra'"):
        run(None, tmp_path / "run", "lorra", steps=1)


def test_crash_and_resume_is_bit_identical(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_resume_is_bit_identical(
        monkeypatch,
        TaskModel,
        lambda name: run(base, tmp_path / name, "lora", steps=8, save_every=4),
    )
