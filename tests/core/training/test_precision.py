"""trainer.precision: auto picks bf16 where the hardware has it; fp32 master weights and
checkpoints; a bf16 run's loss curve follows the fp32 one."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from ptm_core import bert_encoder
from ptm_core.objectives import MaskedLMObjective
from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training import precision as precision_module
from ptm_core.training.precision import choose_precision, cpu_supports_bf16, resolve_precision
from tests.core.family_runs import pretrain_text

CORPUS = (
    Path(__file__).resolve().parents[3] / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
)


def test_explicit_precisions_are_honoured_on_any_device(monkeypatch) -> None:
    monkeypatch.delenv("PTM_PRECISION", raising=False)
    assert resolve_precision("fp32", "cpu") is None
    assert resolve_precision("bf16", "cpu") == torch.bfloat16
    monkeypatch.setenv("PTM_PRECISION", "bf16")  # the override applies to auto only
    assert resolve_precision("fp32", "cpu") is None


def test_auto_on_cpu_follows_the_cpu_features(monkeypatch) -> None:
    monkeypatch.delenv("PTM_PRECISION", raising=False)
    monkeypatch.setattr(precision_module, "cpu_supports_bf16", lambda: True)
    choice = choose_precision("auto", "cpu")
    assert choice.dtype == torch.bfloat16 and "AVX-512 BF16" in choice.reason
    monkeypatch.setattr(precision_module, "cpu_supports_bf16", lambda: False)
    assert resolve_precision("auto", "cpu") is None
    assert resolve_precision("auto", "meta") is None


def test_the_environment_overrides_auto(monkeypatch) -> None:
    monkeypatch.setattr(precision_module, "cpu_supports_bf16", lambda: True)
    monkeypatch.setenv("PTM_PRECISION", "fp32")
    choice = choose_precision("auto", "cpu")
    assert choice.dtype is None and "PTM_PRECISION" in choice.reason
    monkeypatch.setenv("PTM_PRECISION", "half")
    with pytest.raises(ValueError, match="PTM_PRECISION must be 'fp32' or 'bf16'"):
        resolve_precision("auto", "cpu")
    with pytest.raises(ValueError, match=r"trainer\.precision must be one of auto, fp32, bf16"):
        resolve_precision("fp16", "cpu")


def test_cpu_detection_agrees_with_proc_cpuinfo(monkeypatch) -> None:
    flags = precision_module._cpuinfo_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags on this system (not Linux)")
    expected = bool(flags & {"avx512_bf16", "amx_bf16"})
    assert cpu_supports_bf16() == expected
    # Without torch's probes the /proc/cpuinfo fallback gives the same answer.
    cpu_supports_bf16.cache_clear()
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported", raising=False)
    try:
        assert cpu_supports_bf16() == expected
    finally:
        cpu_supports_bf16.cache_clear()


def test_bf16_run_keeps_fp32_weights_optimizer_state_and_checkpoints(
    make_model, make_source, make_config, caplog
) -> None:
    model = make_model(0)
    config = make_config("bf16", precision="bf16", max_steps=10, save_every=10)
    with caplog.at_level("INFO", logger="ptm_core.training.trainer"):
        trainer = Trainer(model, make_source(), config)
        result = trainer.fit()
    assert "precision: bf16 (trainer.precision=bf16)" in caplog.text
    assert all(p.dtype == torch.float32 for p in model.parameters())
    states = [s for s in trainer.optimizer.state.values()]
    assert states and all(
        t.dtype == torch.float32 for s in states for k, t in s.items() if k != "step"
    )
    saved = load_file(Path(result.last_checkpoint) / "model.safetensors")
    assert saved and {t.dtype for t in saved.values()} == {torch.float32}


def test_cpu_bf16_runs_cap_onednn_primitive_cache(
    make_model, make_source, make_config, monkeypatch
) -> None:
    # A CPU bf16 trainer caps oneDNN's per-shape primitive cache (memory grows with every
    # new batch shape otherwise); an fp32 run and a value the user set are left alone.
    variable = precision_module.ONEDNN_CACHE_VARIABLE
    monkeypatch.delenv(variable, raising=False)
    Trainer(
        make_model(0),
        make_source(),
        make_config("fp32", precision="fp32", max_steps=1, warmup_steps=0),
    )
    assert variable not in os.environ
    Trainer(
        make_model(0),
        make_source(),
        make_config("bf16", precision="bf16", max_steps=1, warmup_steps=0),
    )
    assert os.environ[variable] == str(precision_module.CPU_BF16_PRIMITIVE_CACHE)
    monkeypatch.setenv(variable, "7")
    Trainer(
        make_model(0),
        make_source(),
        make_config("own", precision="bf16", max_steps=1, warmup_steps=0),
    )
    assert os.environ[variable] == "7"


# --- a 300-step bf16 run follows fp32 -------------------------------------------------
# Tiny BERT (MLM) on the bundled corpus, same seed, one loss per step. The two runs see the
# same batches and masks, so their curves differ by bf16 rounding alone; smoothed over 20
# steps the per-step sampling noise (each batch's loss varies by ~0.3 around the trend)
# cancels out and what is left is the gap in where training has got to.
STEPS, WINDOW = 300, 20
# Tolerance on the mean |difference| of the 20-step moving averages, in nats. Measured here
# (lr 2e-3, the smoothed fp32 loss falls from 7.64 to 6.56): 0.0003 between bf16 autocast
# and fp32; 0.0023 for a broken bf16 run whose encoder weights were kept in bf16 (no fp32
# master weights). 0.001 sits between the two: 3x the measured gap, under half the broken one.
TOLERANCE = 0.001


def _curve(output_dir: Path, precision: str, encoder_dtype: torch.dtype) -> list[float]:
    def encoder(vocab_size: int) -> Any:
        return bert_encoder(
            vocab_size=vocab_size,
            hidden_size=32,
            num_layers=2,
            num_heads=2,
            max_positions=32,
        ).to(encoder_dtype)

    pretrain_text(
        CORPUS,
        encoder=encoder,
        objectives={"mlm": functools.partial(MaskedLMObjective, mode="dynamic")},
        trainer=TrainerConfig(
            output_dir=str(output_dir),
            max_steps=STEPS,
            learning_rate=2e-3,
            warmup_steps=20,
            log_every=1,
            save_every=STEPS,
            progress=False,
            seed=5,
            precision=precision,
            device="cpu",
        ),
        tokenizer=CORPUS.parent.parent / "sample-vocab.txt",
        max_length=32,
        batch_size=8,
        seed=5,
    )
    lines = (output_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


def _smoothed(values: list[float]) -> torch.Tensor:
    return torch.tensor(values).unfold(0, WINDOW, 1).mean(-1)


def test_bf16_loss_curve_follows_fp32_over_300_steps(tmp_path: Path) -> None:
    gap = _curve_gap(tmp_path, lambda: torch.float32)
    assert gap < TOLERANCE, f"bf16 and fp32 loss curves differ by {gap:.3f} (> {TOLERANCE})"


def _curve_gap(tmp_path: Path, bf16_encoder_dtype: Callable[[], torch.dtype]) -> float:
    fp32 = _curve(tmp_path / "fp32", "fp32", torch.float32)
    bf16 = _curve(tmp_path / "bf16", "bf16", bf16_encoder_dtype())
    assert len(fp32) == len(bf16) == STEPS
    assert fp32 != bf16  # bf16 did run: the losses are not bit-equal
    a, b = _smoothed(fp32), _smoothed(bf16)
    assert a[-1] < a[0] - 0.5  # the run learns: the smoothed loss falls by > 0.5 nat
    return float((a - b).abs().mean())


def test_bf16_attention_with_dropout_matches_sdpa_without_upcasts() -> None:
    # On CPU, bf16 attention with dropout > 0 is written out in bf16 instead of SDPA's
    # math fallback (which upcasts to fp32 and back); with a dropout too small to drop
    # anything it equals fp32 SDPA to bf16 rounding, for bool and additive masks.
    from ptm_core.modules.attention import attend_heads

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=gen) for _ in range(3))
    keep = torch.ones(2, 1, 1, 16, dtype=torch.bool)
    keep[0, ..., 10:] = False
    additive = torch.zeros(2, 1, 1, 16).masked_fill(~keep, float("-inf"))
    for mask in (keep, additive, None):
        expected = attend_heads(q, k, v, mask, 0.0)
        got = attend_heads(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, 1e-12)
        assert got.dtype == torch.bfloat16
        assert (got.float() - expected).abs().max() < 3e-2
    # Dropout does drop: with p=0.5 about half the attention weights are zeroed.
    dropped = attend_heads(q.bfloat16(), k.bfloat16(), v.bfloat16(), None, 0.5)
    assert (dropped.float() - attend_heads(q, k, v, None, 0.0)).abs().max() > 0.1


def test_structured_attention_takes_the_same_bf16_dropout_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every SDPA call goes through attention_backends.sdpa, so structures (causal through
    # is_causal, others through their SDPA mask) get the bf16 write-out too.
    from ptm_core.modules import attention_backends
    from ptm_core.modules.attention_backends import attend
    from ptm_core.modules.attention_structure import AttentionStructure

    calls = []
    written_out = attention_backends._attend_with_dropout

    def counting(*args: Any) -> torch.Tensor:
        calls.append(args[0].dtype)
        return written_out(*args)

    monkeypatch.setattr(attention_backends, "_attend_with_dropout", counting)

    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 16, 8, generator=gen) for _ in range(3))
    padding = torch.ones(2, 16, dtype=torch.bool)
    types = torch.zeros(2, 16, dtype=torch.long)
    types[:, 9:] = 1
    for structure in (
        AttentionStructure.causal(padding),
        AttentionStructure.prefix(padding, types),
    ):
        expected = attend(q, k, v, structure, 0.0, backend="dense")
        got = attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), structure, 1e-12, backend="sdpa")
        assert got.dtype == torch.bfloat16
        assert (got.float() - expected).abs().max() < 3e-2
    assert calls == [torch.bfloat16, torch.bfloat16]
