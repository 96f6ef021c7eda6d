"""Structured attention masks through each backend vs plain padding attention.

    python -m benchmarks.attention_masks                     # CPU (and CUDA when present)
    python -m benchmarks.attention_masks --lengths 128 --pairs 4 --no-flex   # quick

The issue's CPU target: K-BERT, XLNet and causal masks through flex or SDPA take at most
1.1x the time of plain padding attention. For every mask kind (causal with and without
padding, UniLM prefix, packed documents, K-BERT, XLNet content and query streams), one
:class:`~ptm_core.modules.attention_structure.AttentionStructure` runs through
:func:`~ptm_core.modules.attention_backends.attend`; each row is timed in alternating pairs
against plain padding attention (SDPA with a ``[B, 1, 1, L]`` key mask, the same padding)
and reports the median of the per-pair ratios ``mask time / padding time``:

* ``auto`` - what ptm picks (SDPA on CPU; flex on CUDA for the structured kinds);
* ``dense`` - the reference path: SDPA with the ``[B, 1, L, L]`` boolean mask, which is
  what every structured mask cost before structures existed;
* ``flex`` - compiled ``flex_attention`` (forward only on CPU: torch 2.15 has no flex
  backward there), timed against padding SDPA forward.

Steps are attention forward + backward (``(out * grad).sum()`` backward) at BERT-base
shapes (``B=8, h=12, d=64``), fp32 and bf16; outputs are checked against the dense path
before timing. Masks are built once per batch outside the timed step (they are shared by
every layer). Writes ``benchmarks/results/attention_masks.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.paired import time_paired
from ptm_core.modules.attention_backends import attend, compiled_flex_attention
from ptm_core.modules.attention_structure import AttentionStructure

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = (
    "padding",  # padding against itself: the noise floor of this run
    "causal",
    "causal_unpadded",
    "prefix",
    "documents",
    "kbert",
    "xlnet_content",
    "xlnet_query",
)
FLEX_KINDS = ("causal", "kbert", "xlnet_query")
TARGET = 1.1


def structures(batch: int, length: int, seed: int = 0) -> dict[str, AttentionStructure]:
    """One structure per kind over a padded batch (row lengths in ``[L/2, L]``)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=g)
    lengths[0] = length
    padding = torch.arange(length)[None, :] < lengths[:, None]  # (B, L)
    real = padding
    full = torch.ones(batch, length, dtype=torch.bool)
    source = lengths[:, None] // 2
    types = (torch.arange(length)[None, :] >= source).long()
    # Packed rows: documents of 16..L/2 tokens filling the whole row.
    starts = torch.rand(batch, length, generator=g) < 1.0 / max(16, length // 4)
    documents = starts.long().cumsum(-1)
    # K-BERT: ~20% injected tokens in branches of 2-4 tokens hanging on trunk words.
    knowledge = (torch.rand(batch, length, generator=g) < 0.2) & real
    subject = (torch.arange(length)[None, :].expand(batch, -1) // 6).masked_fill(~real, -1)
    branch = (torch.arange(length)[None, :].expand(batch, -1) // 3).masked_fill(~knowledge, -1)
    # XLNet: a random factorisation order, padding last.
    ranks = torch.stack([torch.randperm(length, generator=g) for _ in range(batch)])
    ranks = ranks.masked_fill(~real, length)
    return {
        "padding": AttentionStructure.padding(padding),
        "causal": AttentionStructure.causal(padding),
        "causal_unpadded": AttentionStructure.causal(full),
        "prefix": AttentionStructure.prefix(padding, types),
        "documents": AttentionStructure.documents(documents),
        "kbert": AttentionStructure.kbert(knowledge, subject, branch, real),
        "xlnet_content": AttentionStructure.permutation(ranks, padding, "content"),
        "xlnet_query": AttentionStructure.permutation(ranks, padding, "query"),
    }


def baseline_padding(structure: AttentionStructure) -> AttentionStructure:
    """Plain padding attention over the same real tokens (packed rows: no padding)."""
    return AttentionStructure.padding(structure.real)


def paired_ratio(
    mask_step: Callable[[], Any],
    padding_step: Callable[[], Any],
    pairs: int,
    sync: Callable[[], None],
) -> dict[str, float]:
    """Median of per-pair ``mask time / padding time`` and the median step times (ms)."""
    timing = time_paired(mask_step, padding_step, pairs=pairs, sync=sync)
    ratios = [ours / theirs for ours, theirs in zip(timing.ours, timing.theirs, strict=True)]
    return {
        "ratio": statistics.median(ratios),
        "mask_ms": 1e3 * statistics.median(timing.ours),
        "padding_ms": 1e3 * statistics.median(timing.theirs),
    }


def bench_shape(
    device: torch.device,
    batch: int,
    heads: int,
    length: int,
    dim: int,
    dtype: torch.dtype,
    pairs: int,
    flex: bool,
) -> list[dict[str, Any]]:
    """Every kind through ``auto`` and ``dense`` (forward + backward), and compiled flex
    (forward only on CPU) for :data:`FLEX_KINDS`."""
    g = torch.Generator().manual_seed(1)
    shape = (batch, heads, length, dim)
    base = [torch.randn(shape, generator=g).to(device, dtype) for _ in range(3)]
    grad = torch.randn(shape, generator=g).to(device, dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    rows: list[dict[str, Any]] = []
    masks = {k: s.to(device) for k, s in structures(batch, length).items()}

    def train_step(mask: AttentionStructure, backend: str) -> Callable[[], None]:
        def step() -> None:
            q, k, v = (t.detach().requires_grad_() for t in base)
            out = attend(q, k, v, mask, backend=backend)
            (out * grad).sum().backward()

        return step

    def forward_step(mask: AttentionStructure, backend: str) -> Callable[[], None]:
        def step() -> None:
            with torch.no_grad():
                if backend == "flex":
                    compiled_flex_attention(mask.signature)(*base, block_mask=mask.block_mask())
                else:
                    attend(*base, mask, backend=backend)

        return step

    for kind in KINDS:
        mask = masks[kind]
        padding = baseline_padding(mask).to(device)
        with torch.no_grad():
            reference = attend(*base, mask, backend="dense")
            chosen = attend(*base, mask, backend="auto")
        diff = float((chosen - reference).float().abs().max())
        if diff > tolerance:
            raise RuntimeError(f"{kind}: auto differs from the dense path by {diff:.3g}")
        for backend in ("auto", "dense"):
            result = paired_ratio(
                train_step(mask, backend), train_step(padding, "sdpa"), pairs, sync
            )
            rows.append(
                {"kind": kind, "backend": backend, "step": "fwd+bwd", "max_abs_diff": diff} | result
            )
        if flex and kind in FLEX_KINDS:
            with torch.no_grad():
                out = compiled_flex_attention(mask.signature)(*base, block_mask=mask.block_mask())
            flex_diff = float((out - reference).float().abs().max())
            if flex_diff > tolerance:
                raise RuntimeError(f"{kind}: flex differs from the dense path by {flex_diff:.3g}")
            if device.type == "cpu":  # no flex backward on CPU (torch 2.15)
                steps = forward_step(mask, "flex"), forward_step(padding, "sdpa")
            else:
                steps = train_step(mask, "flex"), train_step(padding, "sdpa")
            result = paired_ratio(*steps, pairs, sync)
            rows.append(
                {
                    "kind": kind,
                    "backend": "flex (compiled)",
                    "step": "fwd" if device.type == "cpu" else "fwd+bwd",
                    "max_abs_diff": flex_diff,
                }
                | result
            )
    for row in rows:
        row.update(
            device=device.type, length=length, dtype=str(dtype).removeprefix("torch."), batch=batch
        )
    return rows


def markdown(results: dict[str, Any]) -> str:
    """The results as a markdown table (one row per kind/backend/shape)."""
    lines = [
        "# Structured attention masks vs plain padding attention",
        "",
        f"{results['date']}, {results['machine']}, torch {results['torch']}, "
        f"{results['threads']} threads; B={results['batch']}, h={results['heads']}, "
        f"d={results['head_dim']}; {results['pairs']} alternated pairs per row, median of "
        "per-pair ratios. Command: `python -m benchmarks.attention_masks`.",
        "",
        "Ratio = attention time with the mask / attention time with plain padding (SDPA, "
        "`[B, 1, 1, L]` key mask, same padding) in the same step; target <= "
        f"{TARGET}x for K-BERT, XLNet and causal. `auto` is what ptm runs (SDPA on CPU); "
        "`dense` is the `[B, L, L]` boolean path every mask took before; `flex (compiled)` "
        "is `torch.compile(flex_attention)` with the structure's BlockMask (forward only on "
        "CPU: torch 2.15 has no flex backward there). On CPU `auto` and `dense` run the same "
        "SDPA kernel for every kind but padding and unpadded causal, and `padding` is timed "
        "against itself: their spread is this run's noise.",
        "",
        "| device | L | dtype | mask | backend | step | mask ms | padding ms | ratio | target |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["rows"]:
        targeted = r["kind"].startswith(("causal", "kbert", "xlnet"))
        verdict = ("met" if r["ratio"] <= TARGET else "missed") if targeted else ""
        lines.append(
            f"| {r['device']} | {r['length']} | {r['dtype']} | {r['kind']} | {r['backend']} | "
            f"{r['step']} | {r['mask_ms']:.2f} | {r['padding_ms']:.2f} | "
            f"**{r['ratio']:.2f}x** | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--no-flex", action="store_true", help="skip the compiled flex rows (~30 s compile each)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    rows: list[dict[str, Any]] = []
    for device in devices:
        for length in (int(x) for x in args.lengths.split(",")):
            for name in args.dtypes.split(","):
                dtype = getattr(torch, name)
                # Compiled flex on CPU: fp32 only (each kind compiles per dtype: a static
                # graph for the first length, one symbolic graph for the later ones).
                flex = not args.no_flex and (device.type == "cuda" or dtype == torch.float32)
                print(f"{device.type} L={length} {name}", flush=True)
                rows += bench_shape(
                    device,
                    args.batch,
                    args.heads,
                    length,
                    args.head_dim,
                    dtype,
                    args.pairs,
                    flex,
                )
                for row in rows[-(2 * len(KINDS) + len(FLEX_KINDS)) :]:
                    if row["length"] == length and row["dtype"] == name:
                        print(
                            f"  {row['kind']:16s} {row['backend']:16s} {row['step']:8s} "
                            f"{row['ratio']:.2f}x",
                            flush=True,
                        )
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__,
        "threads": args.threads,
        "batch": args.batch,
        "heads": args.heads,
        "head_dim": args.head_dim,
        "pairs": args.pairs,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "attention_masks.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "attention_masks.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
