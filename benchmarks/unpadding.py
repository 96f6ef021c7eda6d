"""Unpadded vs padded ptm training step on batches with padding (issue #16, item 2).

    python -m benchmarks.unpadding                      # mini + base, fp32 + bf16, 0-50% padding
    python -m benchmarks.unpadding --sizes mini --pairs 6

Both sides are the same ptm BERT pre-training model (MLM on masked positions only + NSP,
the shapes of ``benchmarks/bert_pair.py``: mini = 4 x 256, base = 12 x 768), the same
weights (two copies, each with the optimizer ptm's Trainer builds), the same batch: 8
sequences of 128 positions whose real lengths are drawn uniformly so that the batch has
the stated share of padding (ragged, right-padded). One side runs with
``apply_execution_settings(model, ExecutionSettings(unpadding="on"))``, the other with ``"off"``. A step is forward + backward +
optimizer step, in fp32 or under ``torch.autocast("cpu", dtype=torch.bfloat16)``. Before
timing, both sides' eval-mode losses are checked equal. The steps alternate (who goes
first swaps every pair) and the speed-up is the median of the per-pair ratios
(padded time / unpadded time). Throughput counts real tokens only.

Writes ``benchmarks/results/unpadding.{json,md}``.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import SIZES, build_alone, make_batch, ptm_optimizer
from benchmarks.paired import CpuSteal, machine_name, steal_note, time_paired

RESULTS = Path(__file__).resolve().parent / "results"


def padded_batch(
    batch_size: int, length: int, padding: float, *, seed: int = 0
) -> dict[str, torch.Tensor]:
    """:func:`make_batch` with ragged real lengths whose mean leaves ``padding`` of the batch
    as padding: lengths evenly spread over ``[L (1 - 2 p), L]`` (at least 8), shuffled,
    right-padded."""
    data = make_batch(batch_size, length, seed=seed)
    gen = torch.Generator().manual_seed(seed + 1)
    low = max(8, round(length * (1 - 2 * padding)))
    spread = torch.linspace(low, length, batch_size).round().long()
    lengths = spread[torch.randperm(batch_size, generator=gen)]
    mask = torch.arange(length)[None, :] < lengths[:, None]  # (B, L)
    data["attention_mask"] = mask.long()
    data["input_ids"] = data["input_ids"].masked_fill(~mask, 0)
    data["token_type_ids"] = data["token_type_ids"].masked_fill(~mask, 0)
    data["mlm_labels"] = data["mlm_labels"].masked_fill(~mask, -100)
    return data


def bench_row(
    size: str, padding: float, precision: str, *, batch: int, length: int, pairs: int
) -> dict[str, Any]:
    """One paired measurement: unpadded ("ours") vs padded ("theirs")."""
    from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings

    unpadded = build_alone("ptm", size)
    padded = copy.deepcopy(unpadded)
    apply_execution_settings(unpadded, ExecutionSettings(unpadding="on"))
    apply_execution_settings(padded, ExecutionSettings(unpadding="off"))
    data = padded_batch(batch, length, padding)
    real_tokens = int(data["attention_mask"].sum())
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
    unpadded.eval(), padded.eval()
    with torch.no_grad(), autocast:
        loss_unpadded = unpadded(data).loss.float().item()
        loss_padded = padded(data).loss.float().item()
    tolerance = 1e-4 if precision == "fp32" else 2e-2 * max(1.0, abs(loss_padded))
    if abs(loss_unpadded - loss_padded) > tolerance:
        raise RuntimeError(
            f"unpadded and padded losses differ before timing ({size}, {precision}, "
            f"{padding:.0%} padding): {loss_unpadded:.6f} vs {loss_padded:.6f}"
        )
    unpadded.train(), padded.train()
    optimizers = {id(m): ptm_optimizer(m, 1e-5) for m in (unpadded, padded)}

    def step(model: torch.nn.Module) -> None:
        with autocast:
            loss = model(data).loss
        loss.backward()
        optimizers[id(model)].step()
        optimizers[id(model)].zero_grad(set_to_none=True)

    timing = time_paired(lambda: step(unpadded), lambda: step(padded), pairs=pairs)
    summary = timing.summary(real_tokens)
    return {
        "size": size,
        "precision": precision,
        "padding_target": padding,
        "padding_actual": 1.0 - real_tokens / (batch * length),
        "real_tokens": real_tokens,
        "loss_unpadded": loss_unpadded,
        "loss_padded": loss_padded,
        "unpadded_tokens_per_s": summary["ptm"]["median"],
        "padded_tokens_per_s": summary["reference"]["median"],
        "speedup_median": summary["speedup_median"],
        "ratios": timing.ratios,
        "pairs": summary["pairs"],
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Unpadded vs padded ptm training step (MLM + NSP, forward + backward + AdamW), "
        f"measured {results['date']} on {results['machine']} (torch {results['torch']}, "
        f"{results['threads']} threads), batch {results['batch']} x {results['length']}, "
        f"ragged right padding. Paired and interleaved; speed-up = median of per-pair "
        f"ratios (padded time / unpadded time); losses checked equal first. "
        f"Command: `{results['command']}`.",
        *steal_note(results.get("cpu_steal_share")),
        "",
        "| size | precision | padding | unpadded real tok/s | padded real tok/s "
        "| unpadded speed-up | pairs |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        lines.append(
            f"| {r['size']} | {r['precision']} | {r['padding_actual']:.0%} "
            f"| {r['unpadded_tokens_per_s']:.0f} | {r['padded_tokens_per_s']:.0f} "
            f"| **{r['speedup_median']:.2f}x** | {r['pairs']} |"
        )
    lines += [
        "",
        '`unpadding_mode="auto"` (the default) unpads from '
        f"{results['auto_min_padding']:.0%} padding "
        "(`ptm_core.encoders.unpadding.AUTO_MIN_PADDING`). At 0% padding both sides run "
        "the same padded path, so how far those rows are from 1.00x is the noise of the run.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="*", default=["mini", "base"], choices=list(SIZES))
    parser.add_argument("--paddings", default="0,0.1,0.2,0.3,0.5")
    parser.add_argument("--precisions", nargs="*", default=["fp32", "bf16"])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from ptm_core.encoders.unpadding import AUTO_MIN_PADDING

    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_name(),
        "torch": torch.__version__,
        "threads": args.threads,
        "batch": args.batch,
        "length": args.length,
        "auto_min_padding": AUTO_MIN_PADDING,
        "command": "python -m benchmarks.unpadding "
        f"--sizes {' '.join(args.sizes)} --paddings {args.paddings} "
        f"--precisions {' '.join(args.precisions)} --pairs {args.pairs} "
        f"--threads {args.threads}",
        "rows": [],
    }
    steal = CpuSteal()
    for size in args.sizes:
        for precision in args.precisions:
            for padding in (float(p) for p in args.paddings.split(",")):
                row = bench_row(
                    size, padding, precision, batch=args.batch, length=args.length, pairs=args.pairs
                )
                results["rows"].append(row)
                print(
                    f"{size} {precision} padding {row['padding_actual']:.0%}: "
                    f"{row['speedup_median']:.2f}x",
                    flush=True,
                )
                results["cpu_steal_share"] = steal.share()
                write(results, args.out)  # after every row: a long run keeps what it measured
    print(markdown(results))


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "unpadding.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "unpadding.md").write_text(markdown(results))


if __name__ == "__main__":
    main()
