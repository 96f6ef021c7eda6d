"""Run the benchmarks and write JSON + a markdown table (``make bench``).

    python -m benchmarks.run                 # everything, CPU (and CUDA when present)
    python -m benchmarks.run --quick         # fewer pairs, mini only
    python -m benchmarks.run --suite train --size base

Every ptm/transformers figure comes from the same process, the same weights and the same
batch (same masked positions, same loss: checked before timing), measured in alternating
pairs; the ratio is the median of the per-pair ratios.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import build_pair, hf_inputs, make_batch
from benchmarks.paired import time_paired

RESULTS = Path(__file__).resolve().parent / "results"


def _sync(device: torch.device):
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def bench_train(size: str, device: torch.device, batch: int, length: int, pairs: int) -> dict:
    """MLM+NSP training step (forward + backward + AdamW), tokens/s."""
    pair = build_pair(size)
    ours, theirs = pair.ours.to(device), pair.theirs.to(device)
    data = {k: v.to(device) for k, v in make_batch(batch, length).items()}
    hf = hf_inputs(data)
    ours.eval(), theirs.eval()
    with torch.no_grad():
        loss_ours, loss_theirs = ours(data).loss.item(), theirs(**hf).loss.item()
    ours.train(), theirs.train()
    fused = device.type == "cuda"
    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-5, fused=fused)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=1e-5, fused=fused)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")

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

    timing = time_paired(step_ours, step_theirs, pairs=pairs, sync=_sync(device))
    return {
        "loss_ptm": loss_ours,
        "loss_transformers": loss_theirs,
        **timing.summary(batch * length),
    }


def bench_inference(size: str, device: torch.device, batch: int, length: int, pairs: int) -> dict:
    """Encoder forward without gradients, tokens/s."""
    pair = build_pair(size)
    encoder, bert = pair.encoder.to(device).eval(), pair.theirs.bert.to(device).eval()
    data = make_batch(batch, length)
    ids, mask = data["input_ids"].to(device), data["attention_mask"].to(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")

    def ours() -> None:
        with torch.no_grad(), autocast:
            encoder(ids, attention_mask=mask)

    def theirs() -> None:
        with torch.no_grad(), autocast:
            bert(input_ids=ids, attention_mask=mask)

    return time_paired(ours, theirs, pairs=pairs, sync=_sync(device)).summary(batch * length)


def bench_visibility(device: torch.device, batch: int, length: int, pairs: int) -> dict:
    """The same ptm encoder with a [B, L, L] visibility matrix vs a [B, L] padding mask."""
    encoder = build_pair("mini").encoder.to(device).eval()
    data = make_batch(batch, length)
    ids = data["input_ids"].to(device)
    padding = data["attention_mask"].to(device)
    # A K-BERT-like tree: blocks of 8 tokens where the last 3 are a branch seen only by
    # their word; everything else sees the trunk.
    visibility = torch.ones(batch, length, length, dtype=torch.bool, device=device)
    for start in range(0, length - 8, 8):
        branch = slice(start + 5, start + 8)
        visibility[:, branch, :] = False
        visibility[:, :, branch] = False
        visibility[:, branch, branch] = True
        visibility[:, start + 4, branch] = True
        visibility[:, branch, start + 4] = True

    def plain() -> None:
        with torch.no_grad():
            encoder(ids, attention_mask=padding)

    def tree() -> None:
        with torch.no_grad():
            encoder(ids, attention_mask=visibility)

    # "ours" = visibility, "theirs" = padding: the ratio is padding time / visibility time.
    summary = time_paired(tree, plain, pairs=pairs, sync=_sync(device)).summary(batch * length)
    summary["visibility_over_padding_time"] = 1.0 / summary.pop("speedup_median")
    return summary


def bench_linking(repeat: int = 10) -> dict:
    """Entity linking documents/s on the sample corpus repeated ``repeat`` times."""
    from ptm_core.data import read_text_corpus
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker, link_documents

    root = Path(__file__).resolve().parents[1]
    kg = load_knowledge_graph(root / "data_specs/knowledge_graph/sample")
    documents = read_text_corpus(root / "data_specs/text_corpus/sample/corpus.txt") * repeat
    linker = EntityLinker(kg)
    start = time.perf_counter()
    linked = link_documents(((d.doc_id, d.sentences) for d in documents), linker)
    seconds = time.perf_counter() - start
    return {
        "documents": len(documents),
        "documents_per_s": len(documents) / seconds,
        "mentions": sum(len(d.mentions) for d in linked),
    }


def bench_memory(size: str, device: str) -> dict:
    """Peak training memory of each implementation, each in its own process."""
    out = {}
    for impl in ("ptm", "transformers"):
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.memory",
                "--impl",
                impl,
                "--size",
                size,
                "--device",
                device,
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        out[impl] = json.loads(completed.stdout.strip().splitlines()[-1])["peak_mb"]
    out["ratio"] = out["ptm"] / out["transformers"]
    return out


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Measured {results['date']} on {results['machine']} (torch {results['torch']}, "
        f"{results['threads']} threads). Command: `{results['command']}`.",
        "",
        "| benchmark | ptm | transformers | ptm / transformers |",
        "|---|---|---|---|",
    ]
    for name, r in results["benchmarks"].items():
        if "speedup_median" in r:
            lines.append(
                f"| {name} (tokens/s, median) | {r['ptm']['median']:.0f} | "
                f"{r['reference']['median']:.0f} | **{r['speedup_median']:.2f}x** |"
            )
        elif "visibility_over_padding_time" in r:
            lines.append(
                f"| {name}: visibility-matrix time / padding-mask time | | | "
                f"**{r['visibility_over_padding_time']:.2f}** |"
            )
        elif "ratio" in r:
            lines.append(
                f"| {name} (MB) | {r['ptm']:.0f} | {r['transformers']:.0f} | **{r['ratio']:.2f}** |"
            )
        elif "documents_per_s" in r:
            lines.append(f"| {name} (documents/s) | {r['documents_per_s']:.0f} | | |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--suite", nargs="*", default=["train", "inference", "visibility", "linking", "memory"]
    )
    parser.add_argument("--size", nargs="*", default=["mini", "base"])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.quick:
        args.size, args.pairs = ["mini"], 4
    torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
        "torch": torch.__version__,
        "threads": args.threads,
        "command": "python -m benchmarks.run " + " ".join(sys.argv[1:]),
        "benchmarks": {},
    }
    bench = results["benchmarks"]
    for device in devices:
        tag = device.type
        for size in args.size:
            if "train" in args.suite:
                print(f"train {size} {tag}", flush=True)
                bench[f"train {size} {tag}"] = bench_train(
                    size, device, args.batch, args.length, args.pairs
                )
            if "inference" in args.suite:
                print(f"inference {size} {tag}", flush=True)
                bench[f"inference {size} {tag}"] = bench_inference(
                    size, device, args.batch, args.length, args.pairs
                )
            if "memory" in args.suite:
                print(f"memory {size} {tag}", flush=True)
                bench[f"peak training memory {size} {tag}"] = bench_memory(size, tag)
        if "visibility" in args.suite:
            bench[f"K-BERT visibility mini {tag}"] = bench_visibility(
                device, args.batch, args.length, args.pairs
            )
    if "linking" in args.suite:
        bench["entity linking (sample x10)"] = bench_linking()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "latest.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
