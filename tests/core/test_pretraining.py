"""The pre-training recipe on the bundled corpus: exact resume and a falling loss."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ptm_core import bert_encoder
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective
from ptm_core.training import TrainerConfig
from tests.core.family_runs import pretrain_text

CORPUS = (
    Path(__file__).resolve().parents[2] / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
)


class _Crash(RuntimeError):
    pass


class _CrashAfterSave:
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, step: int, path: Path) -> None:
        if step == self.step:
            raise _Crash(f"simulated crash after saving step {step}")


def _run(output_dir: Path, callbacks: tuple[object, ...] = ()) -> Path:
    trainer = TrainerConfig(
        output_dir=str(output_dir),
        max_steps=20,
        learning_rate=1e-3,
        warmup_steps=3,
        log_every=1,
        save_every=10,
        progress=False,
        seed=3,
    )
    result = pretrain_text(
        CORPUS,
        encoder=functools.partial(
            bert_encoder, hidden_size=32, num_layers=2, num_heads=2, max_positions=64
        ),
        objectives={
            "mlm": functools.partial(MaskedLMObjective, mode="dynamic"),
            "nsp": NextSentenceObjective,
        },
        trainer=trainer,
        tokenizer=CORPUS.parent.parent / "sample-vocab.txt",
        max_length=64,
        batch_size=8,
        seed=3,
        callbacks=callbacks,
    )
    return result.output_dir


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.integration
def test_resume_after_a_crash_is_bit_identical(tmp_path: Path) -> None:
    straight = _run(tmp_path / "straight")
    with pytest.raises(_Crash):
        _run(tmp_path / "resumed", callbacks=(_CrashAfterSave(10),))
    assert [r["step"] for r in _records(tmp_path / "resumed")] == list(range(1, 11))
    resumed = _run(tmp_path / "resumed")

    a = load_file(straight / "final" / "model.safetensors")
    b = load_file(resumed / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    ra, rb = _records(straight), _records(resumed)
    assert [r["step"] for r in rb] == list(range(1, 21))
    assert [r["loss"] for r in ra] == [r["loss"] for r in rb]
    # The run learns something: the loss falls.
    losses = [r["loss"] for r in ra]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5


def test_a_resumed_run_reuses_the_tokenizer_it_trained(tmp_path: Path) -> None:
    from ptm_core.data import read_text_corpus
    from ptm_core.pretraining import prepare_tokenizer

    documents = read_text_corpus(CORPUS)
    first = prepare_tokenizer(documents, tmp_path, vocab_size=500)
    again = prepare_tokenizer(documents, tmp_path, vocab_size=500)
    assert first.vocab_size == again.vocab_size <= 500
    ids = list(range(first.vocab_size))
    assert first.convert_ids_to_tokens(ids) == again.convert_ids_to_tokens(ids)


def test_ptm_core_imports_without_the_root_project() -> None:
    code = (
        "import sys, ptm_core, ptm_core.pretraining, ptm_core.training; "
        "bad = [m for m in ('hydra', 'omegaconf', 'flows', 'transformers') if m in sys.modules]; "
        "sys.exit(f'ptm_core imported {bad}') if bad else None"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout


@pytest.mark.parametrize("pack", [False, True])
def test_attention_structured_masks_reaches_the_producers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pack: bool
) -> None:
    """``trainer.structured_masks`` (Hydra: attention.structured_masks) makes UniLM's
    objective and packed rows emit AttentionStructure masks; losses equal the dense run's."""
    from ptm_core import text_pretraining as pretraining_module
    from ptm_core.data.batches import PretrainingBatches
    from ptm_core.modules.attention_structure import AttentionStructure
    from ptm_core.objectives import UniLMObjective

    seen: list[bool] = []

    class Recording(PretrainingBatches):
        def batch(self, epoch: int, index: int, order=None):  # type: ignore[no-untyped-def]
            built = super().batch(epoch, index, order)
            seen.append(isinstance(built["attention_mask"], AttentionStructure))
            return built

    monkeypatch.setattr(pretraining_module, "PretrainingBatches", Recording)
    objective = (
        functools.partial(MaskedLMObjective, mode="dynamic")
        if pack
        else functools.partial(UniLMObjective, mode="dynamic")
    )
    losses = {}
    for structured in (False, True):
        seen.clear()
        trainer = TrainerConfig(
            output_dir=str(tmp_path / f"run-{structured}"),
            max_steps=3,
            log_every=1,
            save_every=10,
            progress=False,
            seed=3,
            precision="fp32",
            structured_masks=structured,
        )
        run = pretrain_text(
            CORPUS,
            encoder=functools.partial(
                bert_encoder, hidden_size=32, num_layers=2, num_heads=2, max_positions=64
            ),
            objectives={"lm": objective},
            trainer=trainer,
            tokenizer=CORPUS.parent.parent / "sample-vocab.txt",
            max_length=64,
            batch_size=8,
            seed=3,
            pack=pack,
        )
        assert seen and set(seen) == {structured}
        losses[structured] = [r["loss"] for r in _records(run.output_dir)]
    torch.testing.assert_close(losses[True], losses[False], atol=1e-5, rtol=0)
