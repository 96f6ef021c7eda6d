"""Trainer loop: exact resume, learning, metrics lines, callbacks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.training import Trainer, TrainerCallback, load_checkpoint
from ptm_core.training.trainer import TIMING_KEYS


class Crash(Exception):
    """Stands in for a kill signal in the middle of a run."""


class CrashAfterLog(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        if step == self.step:
            raise Crash


class Recorder:
    """Duck-typed callback (no base class) that records every hook call."""

    def __init__(self) -> None:
        self.logs: list[int] = []
        self.saves: list[tuple[int, Path]] = []

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        self.logs.append(step)

    def on_save(self, step: int, path: Path) -> None:
        assert (path / "trainer_state.json").is_file()
        self.saves.append((step, path))


def _without_timing(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


def _read_metrics(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_is_bit_identical(make_model, make_source, make_config) -> None:
    # 7 batches/epoch, 2 micro-batches/step: the step-10 checkpoint sits mid-epoch 2 and both
    # halves cross epoch boundaries. log_every=3 does not divide 10, so the metrics window
    # itself must survive the resume.
    settings = {"gradient_accumulation_steps": 2, "log_every": 3}
    straight = Trainer(make_model(0), make_source(), make_config("a", **settings)).fit()

    interrupted = make_config("b", **settings)
    with pytest.raises(Crash):
        Trainer(make_model(0), make_source(), interrupted, callbacks=[CrashAfterLog(12)]).fit()
    ckpts = Path(interrupted.output_dir) / "checkpoints"
    assert (ckpts / "latest").read_text().strip() == "step-00000010"
    state = json.loads((ckpts / "step-00000010" / "trainer_state.json").read_text())
    assert (state["epoch"], state["batch_index"]) == (2, 6)

    # A different initialisation proves the weights really come from the checkpoint.
    resumed_model = make_model(99)
    source = make_source()
    resumed = Trainer(resumed_model, source, interrupted).fit()
    assert source.calls[0] == (2, 6)

    reference = Trainer(make_model(0), make_source(), make_config("a", **settings)).model
    load_checkpoint(straight.output_dir, reference)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, resumed_model.state_dict()[name]), name
    assert resumed.final_step == straight.final_step == 20
    assert resumed.history[-1]["loss"] == straight.history[-1]["loss"]
    # Same lines, same values, no duplicate of step 12 (logged before the crash).
    assert _without_timing(_read_metrics(resumed.metrics_path)) == _without_timing(
        _read_metrics(straight.metrics_path)
    )


def test_loss_falls_and_metrics_lines(make_model, make_source, make_config) -> None:
    config = make_config(max_steps=60, learning_rate=3e-2, log_every=10, save_every=60)
    result = Trainer(make_model(0), make_source(), config).fit()
    records = _read_metrics(result.metrics_path)
    assert [r["step"] for r in records] == [10, 20, 30, 40, 50, 60]
    assert records == result.history
    for record in records:
        assert set(record) == {
            "step", "epoch", "loss", "lr", "grad_norm", "tokens_per_s", "data_wait_share",
            "accuracy", "tokens",
        }  # fmt: skip
        assert record["tokens_per_s"] > 0
        assert 0 <= record["data_wait_share"] < 1
    assert records[-1]["loss"] < 0.5 * records[0]["loss"]
    assert records[-1]["accuracy"] > records[0]["accuracy"]
    assert records[-1]["epoch"] == pytest.approx(60 / 7)
    assert records[-1]["lr"] == pytest.approx(3e-2 / 57)  # used by step 60; 0 after it


def test_last_step_is_logged_and_saved(make_model, make_source, make_config) -> None:
    recorder = Recorder()
    config = make_config(max_steps=7, log_every=3, save_every=5, keep_last=5)
    result = Trainer(make_model(), make_source(), config, callbacks=[recorder]).fit()
    assert recorder.logs == [3, 6, 7]
    assert [step for step, _ in recorder.saves] == [5, 7]
    assert result.last_checkpoint == recorder.saves[-1][1]
    assert result.last_checkpoint.name == "step-00000007"
    assert json.loads((result.last_checkpoint / "config.json").read_text()) == {
        "dim": 16,
        "vocab": 16,
    }


def test_finished_run_resumes_to_a_no_op(make_model, make_source, make_config) -> None:
    config = make_config(max_steps=4, save_every=2)
    trainer = Trainer(make_model(), make_source(), config)
    first = trainer.fit()
    with pytest.raises(RuntimeError, match="build a new Trainer"):
        trainer.fit()
    again = Trainer(make_model(5), make_source(), config).fit()
    assert again.final_step == 4 and again.history == []
    assert again.last_checkpoint == first.last_checkpoint
    assert [r["step"] for r in _read_metrics(first.metrics_path)] == [4]


def test_resume_false_starts_over_and_keeps_old_run(make_model, make_source, make_config) -> None:
    first = Trainer(make_model(), make_source(), make_config(max_steps=4, save_every=2)).fit()
    config = make_config(max_steps=2, warmup_steps=0, save_every=2, log_every=1, resume=False)
    second = Trainer(make_model(), make_source(), config).fit()
    assert [r["step"] for r in second.history] == [1, 2]
    assert [r["step"] for r in _read_metrics(second.metrics_path)] == [1, 2]
    assert (first.output_dir / "checkpoints" / "latest").read_text().strip() == "step-00000002"
    archived = list(first.output_dir.glob("previous-run-*/checkpoints/step-00000004"))
    assert len(archived) == 1


def test_accumulation_matches_one_big_batch(make_model, make_source, make_config) -> None:
    # Equal-length rows and no dropout: two half-batches averaged == one full batch.
    def run(name: str, batch_size: int, accumulation: int) -> tuple[Any, dict[str, Any]]:
        model = make_model(0, dropout=0.0)
        source = make_source(batch_size=batch_size, min_length=6)
        config = make_config(
            name,
            max_steps=2,
            warmup_steps=0,
            log_every=1,
            gradient_accumulation_steps=accumulation,
            # An fp32 identity (to 1e-5): under bf16 autocast (auto's choice on a bf16
            # CPU) the two batchings round their matmuls differently.
            precision="fp32",
        )
        return model, Trainer(model, source, config).fit().history[0]

    big_model, big = run("big", batch_size=4, accumulation=1)
    small_model, small = run("small", batch_size=2, accumulation=2)
    assert small["grad_norm"] == pytest.approx(big["grad_norm"], rel=1e-5)
    assert small["loss"] == pytest.approx(big["loss"], rel=1e-5)
    for name, tensor in big_model.state_dict().items():
        torch.testing.assert_close(small_model.state_dict()[name], tensor)


def test_fresh_run_seeds_the_global_rng(make_model, make_source, make_config) -> None:
    models = [make_model(0) for _ in range(3)]
    finals = []
    for index, (model, seed) in enumerate(zip(models, (0, 0, 1), strict=True)):
        torch.manual_seed(1000 + index)  # whatever ran before must not matter
        Trainer(model, make_source(), make_config(f"r{index}", max_steps=3, seed=seed)).fit()
        finals.append(model.hidden.weight.detach().clone())
    assert torch.equal(finals[0], finals[1])
    assert not torch.equal(finals[0], finals[2])  # dropout draws from the seeded RNG


def test_empty_source_is_rejected(make_model, make_source, make_config) -> None:
    with pytest.raises(ValueError, match="batches_per_epoch is 0"):
        Trainer(make_model(), make_source(num_examples=3), make_config())


def test_bf16_autocast_on_cpu(make_model, make_source, make_config) -> None:
    seen: list[torch.dtype] = []
    model = make_model()
    model.hidden.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    config = make_config(max_steps=2, warmup_steps=0, precision="bf16", log_every=1)
    history = Trainer(model, make_source(), config).fit().history
    assert seen and all(dtype == torch.bfloat16 for dtype in seen)
    assert model.hidden.weight.dtype == torch.float32  # master weights stay fp32
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in history)


def test_model_metrics_never_shadow_trainer_keys(make_model, make_source, make_config) -> None:
    class Colliding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = make_model()

        def forward(self, batch: dict[str, torch.Tensor]) -> Any:
            output = self.inner(batch)
            return type(output)(output.loss, {"loss": 123.0, "lr": 7.0})

    config = make_config(max_steps=2, warmup_steps=0, log_every=2)
    (record,) = Trainer(Colliding(), make_source(), config).fit().history
    assert record["model/loss"] == 123.0 and record["model/lr"] == 7.0
    assert record["loss"] < 10 and record["lr"] == pytest.approx(5e-3)


def test_the_run_gives_its_kernels_to_the_model_it_trains(
    make_model, make_source, make_config
) -> None:
    """``trainer.attention_backend`` / ``trainer.unpad`` reach every stack of the model,
    through its ``apply_execution_settings``; the dropout kernel it was built with stays."""
    from torch import nn

    from ptm_core.encoders import EncoderConfig, TransformerEncoder
    from ptm_core.modules.attention import MultiHeadSelfAttention
    from ptm_core.modules.execution import ExecutionSettings

    class WithEncoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.toy = make_model(0)
            config = EncoderConfig(
                vocab_size=20, hidden_size=8, num_layers=2, num_heads=2, intermediate_size=16
            )
            self.encoder = TransformerEncoder(
                config, settings=ExecutionSettings(dropout_kernel="torch")
            )

        def forward(self, **batch: Any) -> Any:
            return self.toy(**batch)

    model = WithEncoder()
    Trainer(model, make_source(), make_config("kernels", attention_backend="dense", unpad="off"))
    assert model.encoder.settings == ExecutionSettings("dense", "off", "torch")
    attention = model.encoder.layers[1].attention
    assert isinstance(attention, MultiHeadSelfAttention)
    assert (attention.attention_backend, attention.dropout_kernel) == ("dense", "torch")
