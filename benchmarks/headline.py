"""The headline speed table: ptm's default against the fastest equivalent transformers setting.

    python -m benchmarks.headline                       # BERT-mini and BERT-base, CPU
    python -m benchmarks.headline --size mini --pairs 4 # a quick look

Every row sets ptm's default (``trainer.precision=auto``: bf16 autocast on a CPU with bf16
units, else fp32; fused AdamW; SDPA) against transformers with ``attn_implementation=
"sdpa"`` in the SAME precision (bf16 autocast where ptm uses it) and the optimizer its
Trainer builds (fused AdamW). The ratio against transformers' default fp32 is the second
column only. Both sides run in one process on the same weights and batch, alternating step
by step; a ratio is the median of the per-pair ratios (:func:`benchmarks.paired.time_paired`).

Beside each row: the CPU's matrix-multiply peak in the row's precision, measured in the
same run (:func:`benchmarks.gemm_peak.gemm_peak`, at the start and at the end, the higher
kept), and each side's executed FLOP/s as a share of it. The FLOPs of a step are counted
by ``torch.utils.flop_counter.FlopCounterMode`` on one step of each side (forward and
backward), so they are what each side executes: ptm's MLM head projects only the masked
positions, a pre-training-only saving that fine-tuning and inference do not have; the
table marks those rows. Memory is the whole-process peak of a fresh process per side, each
in its own default precision (:mod:`benchmarks.memory` ``--whole --precision default``).
Writes ``benchmarks/results/headline.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from benchmarks.bert_pair import build_pair, hf_inputs, make_batch
from benchmarks.gemm_peak import gemm_peak
from benchmarks.paired import CpuSteal, machine_name, steal_note, time_paired
from benchmarks.run import bench_train

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def default_dtype() -> torch.dtype | None:
    """What ptm trains in by default on this CPU (``None`` = fp32)."""
    from ptm_core.training.precision import resolve_precision

    return resolve_precision("auto", torch.device("cpu"))


def counted_flops(step: Callable[[], Any]) -> int:
    """Matrix FLOPs one call of ``step`` executes (forward and backward when it runs one)."""
    with FlopCounterMode(display=False) as counter:
        step()
    return int(counter.get_total_flops())


def train_flops(size: str, batch: int, length: int, dtype: torch.dtype | None) -> dict[str, int]:
    """FLOPs of one training step (forward + backward) of each side."""
    pair = build_pair(size)
    data = make_batch(batch, length)
    hf = hf_inputs(data)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None)

    def step(model: Any, kwargs: bool) -> Callable[[], None]:
        def run() -> None:
            with autocast:
                loss = model(**hf).loss if kwargs else model(data).loss
            loss.backward()

        return run

    return {
        "ptm": counted_flops(step(pair.ours.train(), False)),
        "transformers": counted_flops(step(pair.theirs.train(), True)),
    }


def bench_inference(
    size: str, batch: int, length: int, pairs: int, *, theirs_dtype: torch.dtype | None
) -> dict[str, Any]:
    """Encoder forward without gradients: ptm in its default precision, transformers'
    ``BertModel`` (sdpa) in ``theirs_dtype`` (``None`` = fp32), tokens/s."""
    pair = build_pair(size)
    encoder, bert = pair.encoder.eval(), pair.theirs.bert.eval()
    data = make_batch(batch, length)
    ids, mask = data["input_ids"], data["attention_mask"]
    ours_dtype = default_dtype()
    ours_cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=ours_dtype is not None)
    theirs_cast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=theirs_dtype is not None)

    def ours() -> None:
        with torch.no_grad(), ours_cast:
            encoder(ids, attention_mask=mask)

    def theirs() -> None:
        with torch.no_grad(), theirs_cast:
            bert(input_ids=ids, attention_mask=mask)

    flops = {"ptm": counted_flops(ours), "transformers": counted_flops(theirs)}
    summary = time_paired(ours, theirs, pairs=pairs).summary(batch * length)
    return {**summary, "flops": flops}


def bench_memory(size: str) -> dict[str, Any]:
    """Whole-process peak training memory, each side in its default precision, MB."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as directory:
        batch_file = Path(directory) / "batch.pt"
        torch.save(make_batch(8, 128), batch_file)
        for impl in ("ptm", "transformers"):
            command = [sys.executable, "-m", "benchmarks.memory", "--impl", impl, "--size", size]
            command += ["--whole", "--precision", "default", "--alone", "--batch-file"]
            done = subprocess.run(
                [*command, str(batch_file)],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            out[impl] = json.loads(done.stdout.strip().splitlines()[-1])
    other = {"ptm": "transformers", "transformers": "ptm_core"}
    for impl, name in other.items():
        if out[impl]["loaded"][name]:
            raise RuntimeError(f"the {impl} memory process imported {name}: not measured alone")
    out["ratio"] = out["ptm"]["peak_mb"] / out["transformers"]["peak_mb"]
    return out


def share(tokens_per_s: float, flops_per_step: int, tokens_per_step: int, peak: float) -> float:
    """Executed FLOP/s as a share of ``peak`` (GFLOP/s)."""
    return tokens_per_s * flops_per_step / tokens_per_step / 1e9 / peak


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every row of the table, on CPU with ``args.threads`` threads."""
    torch.set_num_threads(args.threads)
    dtype = default_dtype()
    peak_dtype = dtype or torch.float32
    steal = CpuSteal()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_name(),
        "torch": torch.__version__,
        "threads": args.threads,
        "precision": "bf16 autocast" if dtype else "fp32",
        "command": " ".join(["python -m benchmarks.headline", *sys.argv[1:]]),
        "gemm_peak_gflops": [gemm_peak(args.threads, dtype=peak_dtype)],
        "rows": {},
    }
    tokens = args.batch * args.length
    shape = (args.batch, args.length, args.pairs)
    for size in args.size:
        print(f"train {size}", flush=True)
        like = "bf16" if dtype else "equal"
        cpu = torch.device("cpu")
        train = bench_train(size, cpu, *shape, precision=like)
        versus_fp32 = bench_train(size, cpu, *shape, precision="default" if dtype else "equal")
        results["rows"][f"train {size}"] = {
            "kind": "train",
            "like": train,
            "fp32": versus_fp32,
            "flops": train_flops(size, args.batch, args.length, dtype),
            "masked_only_head": True,
        }
        print(f"inference {size}", flush=True)
        results["rows"][f"inference {size}"] = {
            "kind": "inference",
            "like": bench_inference(size, *shape, theirs_dtype=dtype),
            "fp32": bench_inference(size, *shape, theirs_dtype=None),
            "masked_only_head": False,
        }
        print(f"memory {size}", flush=True)
        results["rows"][f"memory {size}"] = {"kind": "memory", **bench_memory(size)}
    results["gemm_peak_gflops"].append(gemm_peak(args.threads, dtype=peak_dtype))
    results["cpu_steal_share"] = steal.share()
    peak = max(results["gemm_peak_gflops"])
    for row in results["rows"].values():
        if row["kind"] == "memory":
            continue
        flops, like = row.get("flops") or row["like"]["flops"], row["like"]
        row["share_of_peak"] = {
            "ptm": share(like["ptm"]["median"], flops["ptm"], tokens, peak),
            "transformers": share(like["reference"]["median"], flops["transformers"], tokens, peak),
        }
    return results


def markdown(results: dict[str, Any]) -> str:
    """The table, with the machine, the peak and what each column compares."""
    precision = results["precision"]
    peaks = " and ".join(f"{p:.0f}" for p in results["gemm_peak_gflops"])
    lines = [
        f"Measured {results['date']} on {results['machine']} (torch {results['torch']}, "
        f"{results['threads']} threads). Command: `{results['command']}`.",
        *steal_note(results.get("cpu_steal_share")),
        "",
        f"ptm's default precision here: {precision}. Matrix-multiply peak in that precision, "
        f"measured at the start and the end of the run: {peaks} GFLOP/s (the higher is the "
        "peak below). Batch 8 x 128, MLM + NSP for training (dropout 0.1, fused AdamW both "
        "sides), encoder forward for inference.",
        "",
        f"| row | ptm tokens/s | transformers sdpa + {precision} | **ratio** | "
        "share of peak, ptm / transformers | vs transformers fp32 (default) | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in results["rows"].items():
        if row["kind"] == "memory":
            lines.append(
                f"| {name}, whole-process peak MB, each side's default precision "
                f"(ptm {row['ptm']['precision']}, transformers {row['transformers']['precision']})"
                f" | {row['ptm']['peak_mb']:.0f} | {row['transformers']['peak_mb']:.0f} | "
                f"**{row['ratio']:.2f}** | | | lower is better |"
            )
            continue
        like, fp32, shares = row["like"], row["fp32"], row["share_of_peak"]
        note = (
            "pre-training only: ptm's MLM head projects the masked positions only"
            if row["masked_only_head"]
            else "same FLOPs both sides"
        )
        lines.append(
            f"| {name} | {like['ptm']['median']:.0f} | {like['reference']['median']:.0f} | "
            f"**{like['speedup_median']:.2f}x** | {100 * shares['ptm']:.0f}% / "
            f"{100 * shares['transformers']:.0f}% | {fp32['speedup_median']:.2f}x | {note} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", nargs="*", default=["mini", "base"])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = measure(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "headline.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "headline.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
