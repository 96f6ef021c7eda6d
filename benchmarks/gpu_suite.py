"""The GPU suite (issue #16): BERT-base and BERT-large pre-training steps on one CUDA device.

    python -m benchmarks.gpu_suite                       # on a CUDA machine: the whole suite
    python -m benchmarks.gpu_suite --device cpu --smoke  # the same code path on CPU, tiny

Rows, each measured in one process with the same weights and the same batch (losses
checked equal before timing), alternating ptm and the reference step by step
(:func:`benchmarks.paired.time_paired`):

* **train**: BERT-base and BERT-large, MLM + NSP, seq 128 and 512, bf16 autocast on both
  sides; ptm on its default fast path (attention backend ``auto``, unpadding ``auto``,
  MLM head on the masked positions only) against ``transformers.BertForPreTraining`` with
  ``attn_implementation="sdpa"``. Tokens/s, model FLOP utilisation and peak memory.
* **padded vs unpadded**: the same ptm step on a batch with 30% padding, unpadding off vs on.
* **masks**: attention forward + backward of BERT-base shapes for the K-BERT, XLNet and
  causal masks through flex / SDPA against the dense boolean path and against plain
  padding (:mod:`benchmarks.attention_masks`).

MFU counts the same useful work for both libraries: ``6 N`` per token for the encoder's
non-embedding weights, ``12 n_layers D L`` per token for the attention scores and context,
and ``6 D V`` per *masked* token for the MLM decoder (computing the head over every
position is work the loss does not need, so it is not counted). The peak is the dense bf16
figure of the GPU (``--peak-tflops``; H100/H200 SXM: 989).

Results: ``benchmarks/results/gpu_suite.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import (
    SIZES,
    build_pair,
    hf_inputs,
    hf_optimizer,
    make_batch,
    ptm_optimizer,
)
from benchmarks.paired import time_paired

RESULTS = Path(__file__).resolve().parent / "results"
# Dense bf16 tensor-core peaks (TFLOP/s, without sparsity), by a substring of the name.
PEAK_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0}
# MLPerf Training v4.0 BERT-large: about 970-1,000 samples/s per H100/H200 in 8-GPU runs.
MLPERF_SAMPLES_PER_GPU = 985.0


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    """The GPU's dense bf16 peak, from ``--peak-tflops`` or its name; None when unknown."""
    if override is not None:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_TFLOPS.items():
        if key in name:
            return value
    return None


def model_flops(size: str, batch: int, length: int, masked: int) -> float:
    """Training FLOPs of one step (forward + backward) on ``batch x length`` tokens."""
    shape = SIZES[size]
    hidden, layers = shape["hidden_size"], shape["num_hidden_layers"]
    inner = shape["intermediate_size"]
    per_layer = 4 * hidden * hidden + 2 * hidden * inner  # QKV + output, the two FFN GEMMs
    tokens = batch * length
    dense = 6 * layers * per_layer * tokens
    attention = 12 * layers * hidden * length * tokens
    from benchmarks.bert_pair import VOCAB_SIZE

    head = 6 * hidden * (hidden + VOCAB_SIZE) * masked
    return float(dense + attention + head)


def _sync(device: torch.device):
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _peak_memory(step, device: torch.device, steps: int = 3) -> float | None:
    """Peak allocated CUDA memory (MB) over ``steps`` of ``step`` alone."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    for _ in range(steps):
        step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) / 2**20


def _ragged(data: dict[str, torch.Tensor], padding: float, seed: int) -> dict[str, torch.Tensor]:
    """The batch with ``padding`` of its positions turned into right padding (ragged rows)."""
    batch, length = data["input_ids"].shape
    gen = torch.Generator().manual_seed(seed)
    # Lengths uniform around (1 - padding) * L, each row keeps at least a quarter.
    mean = (1.0 - padding) * length
    spread = min(mean - length / 4, length - mean)
    lengths = (mean + (torch.rand(batch, generator=gen) * 2 - 1) * spread).round().long()
    lengths = lengths.clamp(2, length)
    real = torch.arange(length)[None, :] < lengths[:, None]
    out = dict(data)
    out["attention_mask"] = real.long()
    out["input_ids"] = data["input_ids"].masked_fill(~real, 0)
    out["mlm_labels"] = data["mlm_labels"].masked_fill(~real, -100)
    out["token_type_ids"] = data["token_type_ids"].masked_fill(~real, 0)
    return out


def _configure(model: torch.nn.Module, backend: str, unpad: str) -> None:
    from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings

    apply_execution_settings(model, ExecutionSettings(attention_backend=backend))
    apply_execution_settings(model, ExecutionSettings(unpadding=unpad))


def bench_train(
    size: str,
    length: int,
    batch: int,
    pairs: int,
    device: torch.device,
    peak: float | None,
    dtype: torch.dtype = torch.bfloat16,
) -> dict[str, Any]:
    """ptm's default fast path vs transformers (sdpa) in the same autocast, one step each."""
    pair = build_pair(size)
    ours, theirs = pair.ours.to(device), pair.theirs.to(device)
    _configure(ours, "auto", "auto")
    data = {k: v.to(device) for k, v in make_batch(batch, length).items()}
    hf = hf_inputs(data)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        loss_ours, loss_theirs = ours(data).loss.item(), theirs(**hf).loss.item()
    if abs(loss_ours - loss_theirs) > 1e-3:
        raise RuntimeError(
            f"ptm and transformers disagree before timing ({size}, L={length}): eval-mode "
            f"loss {loss_ours:.6f} vs {loss_theirs:.6f}"
        )
    ours.train(), theirs.train()
    opt_ours, opt_theirs = ptm_optimizer(ours, 1e-5), hf_optimizer(theirs, 1e-5)
    autocast = torch.autocast(device.type, dtype=dtype)

    def step_ours() -> None:
        with autocast:
            loss = ours(data).loss
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_theirs() -> None:
        with autocast:
            loss = theirs(**hf).loss
        loss.backward()
        opt_theirs.step()
        opt_theirs.zero_grad(set_to_none=True)

    timing = time_paired(step_ours, step_theirs, warmup=3, pairs=pairs, sync=_sync(device))
    summary = timing.summary(batch * length)
    masked = int((data["mlm_labels"] != -100).sum())
    flops = model_flops(size, batch, length, masked)
    for side, key in (("ptm", "ptm"), ("transformers", "reference")):
        tokens_per_s = summary[key]["median"]
        samples_per_s = tokens_per_s / length
        summary[f"{side}_samples_per_s"] = samples_per_s
        summary[f"{side}_tflops"] = flops * samples_per_s / batch / 1e12
        summary[f"{side}_mfu"] = summary[f"{side}_tflops"] / peak if peak else None
    summary["ptm_peak_mb"] = _peak_memory(step_ours, device)
    summary["transformers_peak_mb"] = _peak_memory(step_theirs, device)
    summary.update(size=size, length=length, batch=batch, loss_ptm=loss_ours)
    return summary


def bench_unpadding(
    size: str, length: int, batch: int, pairs: int, device: torch.device, padding: float = 0.3
) -> dict[str, Any]:
    """The same ptm step on a batch with ``padding`` padding: unpadded vs padded."""
    pair = build_pair(size, dropout=0.0)
    model = pair.ours.to(device)
    data = {k: v.to(device) for k, v in _ragged(make_batch(batch, length), padding, 0).items()}
    optimizer = ptm_optimizer(model, 1e-5)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16)

    def step(unpad: str):
        def run() -> None:
            _configure(model, "auto", unpad)
            with autocast:
                loss = model(data).loss
            loss.backward()
            optimizer.zero_grad(set_to_none=True)  # no update: both sides see equal weights

        return run

    losses = {}
    for unpad in ("on", "off"):
        _configure(model, "auto", unpad)
        with torch.no_grad():
            losses[unpad] = model.eval()(data).loss.item()
    model.train()
    if abs(losses["on"] - losses["off"]) > 1e-2:
        raise RuntimeError(f"unpadded and padded losses differ: {losses}")
    summary = time_paired(step("on"), step("off"), pairs=pairs, sync=_sync(device)).summary(
        int(data["attention_mask"].sum())
    )
    summary.update(
        size=size,
        length=length,
        batch=batch,
        padding=1.0 - float(data["attention_mask"].float().mean()),
    )
    return summary


def bench_masks(device: torch.device, lengths: list[int], pairs: int) -> list[dict[str, Any]]:
    """Attention forward + backward per mask kind and backend, bf16, BERT-base shapes
    (:func:`benchmarks.attention_masks.bench_shape`; compiled flex trains on CUDA)."""
    from benchmarks.attention_masks import bench_shape

    rows: list[dict[str, Any]] = []
    for length in lengths:
        # Compiled flex has no backward on CPU (torch 2.15): CPU runs leave it out.
        flex = device.type == "cuda"
        rows += bench_shape(device, 8, 12, length, 64, torch.bfloat16, pairs, flex=flex)
    return rows


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Measured {results['date']} on {results['device']} (torch {results['torch']}). "
        f"Command: `{results['command']}`.",
        "",
        "| model | seq | batch | ptm samples/s | transformers samples/s | ptm / transformers "
        "| ptm MFU | transformers MFU | peak MB ptm / transformers |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def pct(value: float | None) -> str:
        return f"{100 * value:.0f}%" if value is not None else "n/a"

    def mb(value: float | None) -> str:
        return f"{value:.0f}" if value is not None else "n/a"

    for row in results["train"]:
        lines.append(
            f"| BERT-{row['size']} | {row['length']} | {row['batch']} | "
            f"{row['ptm_samples_per_s']:.0f} | {row['transformers_samples_per_s']:.0f} | "
            f"**{row['speedup_median']:.2f}x** | {pct(row['ptm_mfu'])} | "
            f"{pct(row['transformers_mfu'])} | {mb(row['ptm_peak_mb'])} / "
            f"{mb(row['transformers_peak_mb'])} |"
        )
    large = [r for r in results["train"] if r["size"] == "large" and r["length"] == 128]
    if large:
        lines += [
            "",
            f"BERT-large seq 128: {large[0]['ptm_samples_per_s']:.0f} samples/s on one GPU "
            f"against MLPerf Training v4.0's ~{MLPERF_SAMPLES_PER_GPU:.0f} samples/s per "
            "H100/H200 (8-GPU runs, fused kernels and CUDA graphs).",
        ]
    if results.get("unpadding"):
        lines += ["", "| ptm step, 30% padding | seq | unpadded / padded (real tokens/s) |"]
        lines.append("|---|---|---|")
        for row in results["unpadding"]:
            lines.append(
                f"| BERT-{row['size']} ({100 * row['padding']:.0f}% padding) | {row['length']} "
                f"| **{row['speedup_median']:.2f}x** |"
            )
    if results.get("masks"):
        lines += [
            "",
            "Attention with each mask, forward + backward, bf16, B=8 h=12 d=64: time relative "
            "to plain padding through SDPA (target <= 1.1x for K-BERT, XLNet and causal).",
            "",
            "| L | mask | backend | ratio |",
            "|---|---|---|---|",
        ]
        for row in results["masks"]:
            lines.append(
                f"| {row['length']} | {row['kind']} | {row['backend']} | **{row['ratio']:.2f}x** |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", nargs="*", default=["base", "large"])
    parser.add_argument("--lengths", nargs="*", type=int, default=[128, 512])
    parser.add_argument("--batch", type=int, default=None, help="default 64 at 128, 16 at 512")
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--skip-masks", action="store_true")
    parser.add_argument(
        "--smoke", action="store_true", help="mini model, seq 32, 2 pairs (checks the code)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(
            "benchmarks.gpu_suite: no CUDA device here; run it on a GPU machine "
            "(or --device cpu --smoke to check the code path)"
        )
    if args.smoke:
        args.sizes, args.lengths, args.pairs, args.batch = ["mini"], [32], 2, 4
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    peak = peak_tflops(device, args.peak_tflops)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "peak_tflops": peak,
        "command": " ".join(["python -m benchmarks.gpu_suite", *sys.argv[1:]]),
        "train": [],
        "unpadding": [],
        "masks": None,
    }
    for size in args.sizes:
        for length in args.lengths:
            batch = args.batch or (64 if length <= 128 else 16)
            print(f"gpu suite: train {size} L={length} B={batch}", flush=True)
            results["train"].append(bench_train(size, length, batch, args.pairs, device, peak))
            print(f"gpu suite: unpadding {size} L={length}", flush=True)
            results["unpadding"].append(bench_unpadding(size, length, batch, args.pairs, device))
    if not args.skip_masks:
        print("gpu suite: attention masks", flush=True)
        lengths = [32] if args.smoke else [128, 512]
        results["masks"] = bench_masks(device, lengths, args.pairs)
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "gpu_suite" if not args.smoke else "gpu_suite_smoke"
    (args.out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / f"{stem}.md").write_text(markdown(results))
    print(markdown(results))
    return results


if __name__ == "__main__":
    main()
