"""Does ``trainer.compile`` pay? Compiled vs eager BERT training step, paired, on this machine.

    python -m benchmarks.compile_step                       # mini, fp32 and bf16, 10 pairs
    python -m benchmarks.compile_step --precisions fp32 --pairs 6

The step is the trainer's: forward + loss (ptm's MLM + NSP ``PretrainingModel``) through
:func:`ptm_core.training.compilation.compile_forward` (so its backward is compiled too),
then fused AdamW. Before timing, the eager and compiled models (same weights) must give the
same eval-mode loss. Compilation (the first compiled forward + backward) is timed on its
own and kept out of the step timings; then the two steps alternate after warm-up and the
median of per-pair ratios is reported (``benchmarks.paired``).

Inductor's on-disk cache is disabled unless ``--warm-cache``: the compile times are what a
first run pays. A second pair measures ``trainer.activation_checkpointing``: eager steps with and without
recomputation, plus the bytes autograd keeps for backward in each.

Writes ``benchmarks/results/compile_step.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import platform
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import build_pair, make_batch, ptm_optimizer
from benchmarks.paired import time_paired

RESULTS = Path(__file__).resolve().parent / "results"


def _autocast(precision: str) -> contextlib.AbstractContextManager[Any]:
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _step(model: Any, optimizer: torch.optim.Optimizer, batch: dict, precision: str):
    def run() -> float:
        with _autocast(precision):
            loss = model(batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss.detach())

    return run


def _saved_bytes(model: Any, batch: dict, precision: str) -> int:
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), _autocast(precision):
        loss = model(batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(storages.values())


def bench_compile(size: str, batch_size: int, length: int, pairs: int, precision: str) -> dict:
    from ptm_core.training.compilation import compile_forward
    from ptm_core.training.config import TrainerConfig

    eager = build_pair(size).ours
    compiled_model = copy.deepcopy(eager)
    batch = make_batch(batch_size, length)
    compiled = compile_forward(compiled_model, TrainerConfig(output_dir="unused", compile=True))
    eager.eval(), compiled_model.eval()
    started = time.perf_counter()
    with torch.no_grad(), _autocast(precision):
        loss_eager = eager(batch).loss.item()
        loss_compiled = compiled(batch).loss.item()
    compile_eval_s = time.perf_counter() - started
    tolerance = 1e-4 if precision == "fp32" else 2e-2
    if abs(loss_eager - loss_compiled) > tolerance:
        raise RuntimeError(
            f"compiled and eager losses differ before timing ({precision}): "
            f"{loss_compiled:.6f} vs {loss_eager:.6f}"
        )
    eager.train(), compiled_model.train()
    lr = 1e-5
    step_eager = _step(eager, ptm_optimizer(eager, lr, lookups=False), batch, precision)
    step_compiled = _step(
        compiled, ptm_optimizer(compiled_model, lr, lookups=False), batch, precision
    )
    started = time.perf_counter()
    step_compiled()  # compiles the training graph (forward + backward)
    compile_train_s = time.perf_counter() - started
    timing = time_paired(step_compiled, step_eager, warmup=2, pairs=pairs)
    return {
        "precision": precision,
        "loss_eager_eval": loss_eager,
        "loss_compiled_eval": loss_compiled,
        "compile_seconds_eval_graph": compile_eval_s,
        "compile_seconds_train_graph": compile_train_s,
        **timing.summary(batch_size * length),
    }


def bench_checkpointing(size: str, batch_size: int, length: int, pairs: int) -> dict:
    from ptm_core.training.memory import enable_activation_checkpointing

    plain = build_pair(size).ours
    recomputed = copy.deepcopy(plain)
    enable_activation_checkpointing(recomputed)
    batch = make_batch(batch_size, length)
    plain.train(), recomputed.train()
    saved_plain = _saved_bytes(plain, batch, "fp32")
    saved_recomputed = _saved_bytes(recomputed, batch, "fp32")
    lr = 1e-5
    torch.manual_seed(0)
    first_plain = _step(plain, ptm_optimizer(plain, lr, lookups=False), batch, "fp32")
    torch.manual_seed(0)
    first_recomputed = _step(
        recomputed, ptm_optimizer(recomputed, lr, lookups=False), batch, "fp32"
    )
    timing = time_paired(first_plain, first_recomputed, warmup=1, pairs=pairs)
    return {
        "saved_bytes_plain": saved_plain,
        "saved_bytes_checkpointed": saved_recomputed,
        # ptm = plain, reference = checkpointed: speedup_median < 1 is the recompute cost.
        **timing.summary(batch_size * length),
    }


def markdown(results: dict[str, Any]) -> str:
    size, batch, length = results["size"], results["batch"], results["length"]
    lines = [
        f"# `trainer.compile` and `trainer.activation_checkpointing` on CPU ({results['date']})",
        "",
        f"BERT {size} MLM+NSP training step (forward + loss + backward + fused AdamW), batch "
        f"{batch} x {length}, {results['threads']} threads, {results['cpu']}, torch "
        f"{results['torch']}. Paired and alternated (median of {results['pairs']} per-pair "
        f"ratios) after warm-up; compile time measured apart. Command: `{results['command']}`.",
        "",
        "| precision | eager tokens/s | compiled tokens/s | compiled / eager (paired median) "
        "| compile time, train graph (s) | compile time, eval graph (s) |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["compile"]:
        lines.append(
            f"| {row['precision']} | {row['reference']['median']:,.0f} | "
            f"{row['ptm']['median']:,.0f} | **{row['speedup_median']:.2f}x** | "
            f"{row['compile_seconds_train_graph']:.1f} | {row['compile_seconds_eval_graph']:.1f} |"
        )
    ac = results.get("checkpointing")
    if ac:
        lines += [
            "",
            "Activation checkpointing (fp32, eager): "
            f"{ac['saved_bytes_plain'] / 2**20:.1f} MiB kept for backward without, "
            f"{ac['saved_bytes_checkpointed'] / 2**20:.1f} MiB with "
            f"({ac['saved_bytes_plain'] / max(ac['saved_bytes_checkpointed'], 1):.1f}x less); "
            f"step time with / without: {ac['speedup_median']:.2f}x (paired median).",
        ]
    lines += ["", results["verdict"], ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="mini")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-checkpointing", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--warm-cache", action="store_true", help="let Inductor reuse its on-disk cache"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.warm_cache:
        import torch._inductor.config as inductor_config

        # A first run's cost: a rerun on this machine finds the kernels in the cache.
        inductor_config.force_disable_caches = True
    rows = [
        bench_compile(args.size, args.batch, args.length, args.pairs, precision)
        for precision in args.precisions.split(",")
    ]
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "size": args.size,
        "batch": args.batch,
        "length": args.length,
        "pairs": args.pairs,
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "command": "python -m benchmarks.compile_step"
        + "".join(
            f" --{k.replace('_', '-')} {v}" if not isinstance(v, bool) else f" --{k}"
            for k, v in vars(args).items()
            if k != "out" and v != parser.get_default(k)
        ),
        "compile": rows,
    }
    if not args.no_checkpointing:
        results["checkpointing"] = bench_checkpointing(
            args.size, args.batch, args.length, args.pairs
        )
    gains = ", ".join(f"{row['precision']} {row['speedup_median']:.2f}x" for row in rows)
    worst_compile = max(row["compile_seconds_train_graph"] for row in rows)
    results["verdict"] = (
        f"Paired gain of compiling the step: {gains}; compiling the training graph took up "
        f"to {worst_compile:.0f} s ({'warm' if args.warm_cache else 'cold'} Inductor cache). "
        "`trainer.compile` stays off by default: that cost comes before the first step of "
        "every run and again for each new batch shape, which every test, demo and short "
        "fine-tuning run would pay. Turn it on for long runs with fixed-shape batches."
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_step.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "compile_step.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
