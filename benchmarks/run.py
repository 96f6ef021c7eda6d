"""Run the benchmarks and write JSON + a markdown table (``make bench``).

    python -m benchmarks.run                 # everything, CPU (and CUDA when present)
    python -m benchmarks.run --quick         # fewer pairs, mini only, no compiled training
    python -m benchmarks.run --suite train --size base
    python -m benchmarks.run --suite data-pipeline --data-sizes 10MB,100MB,1GB   # data pipeline

Every ptm/transformers figure comes from the same process, the same weights and the same
batch (same masked positions, same loss: checked before timing), measured in alternating
pairs; the ratio is the median of the per-pair ratios. Rows that are not ptm's eager
default (compiled, another optimizer) say so in their label; the transformers side is
always eager. Optimizers: ptm uses what its Trainer builds (``build_optimizer``: fused
AdamW on CPU and CUDA), transformers what its ``Trainer`` builds by default
(``adamw_torch_fused`` on torch >= 2.8); the ``train-foreach`` rows use
``torch.optim.AdamW()`` on both sides. Gradient clipping is not part of either step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from benchmarks.bert_pair import (
    build_pair,
    describe_optimizer,
    hf_inputs,
    hf_optimizer,
    make_batch,
    ptm_optimizer,
)
from benchmarks.paired import CpuSteal, machine_name, steal_note, time_paired
from benchmarks.xlnet_pair import bench_xlnet_train

RESULTS = Path(__file__).resolve().parent / "results"


def _sync(device: torch.device):
    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def bench_train(
    size: str,
    device: torch.device,
    batch: int,
    length: int,
    pairs: int,
    *,
    optimizers: str = "default",
    compiled: bool = False,
    precision: str = "equal",
) -> dict:
    """MLM+NSP training step (forward + backward + AdamW), tokens/s.

    Args:
        optimizers: ``"default"``: each library's default (ptm: what our Trainer builds,
            transformers: what its Trainer builds); ``"foreach"``: ``torch.optim.AdamW()``
            with torch's default (multi-tensor) implementation on both sides.
        compiled: run ptm's model through ``torch.compile`` (Inductor); transformers stays
            eager. Compilation happens in the warm-up steps and is not timed.
        precision: ``"equal"`` (the original rows): both sides fp32 on CPU and bf16
            autocast on CUDA; ``"default"``: ptm in the precision its Trainer picks with
            ``trainer.precision=auto`` (bf16 autocast on a CPU with AVX-512 BF16/AMX),
            transformers in its default fp32; ``"bf16"``: bf16 autocast on both sides.
            The losses are checked equal in fp32 before timing in every case.
    """
    from ptm_core.training.precision import resolve_precision

    pair = build_pair(size)
    ours, theirs = pair.ours.to(device), pair.theirs.to(device)
    data = {k: v.to(device) for k, v in make_batch(batch, length).items()}
    hf = hf_inputs(data)
    forward_ours = torch.compile(ours) if compiled else ours
    ours.eval(), theirs.eval()
    with torch.no_grad():
        loss_ours, loss_theirs = forward_ours(data).loss.item(), theirs(**hf).loss.item()
    if abs(loss_ours - loss_theirs) > 1e-4:
        raise RuntimeError(
            f"ptm and transformers disagree before timing ({size}): eval-mode loss "
            f"{loss_ours:.6f} vs {loss_theirs:.6f}; the comparison would not be like for like"
        )
    ours.train(), theirs.train()
    lr = 1e-5
    if optimizers == "default":
        opt_ours = ptm_optimizer(ours, lr, lookups=not compiled)
        opt_theirs = hf_optimizer(theirs, lr)
    elif optimizers == "foreach":
        opt_ours = torch.optim.AdamW(ours.parameters(), lr=lr)
        opt_theirs = torch.optim.AdamW(theirs.parameters(), lr=lr)
    else:
        raise ValueError(f"optimizers must be 'default' or 'foreach', got {optimizers!r}")
    equal_bf16 = device.type == "cuda"
    if precision == "equal":
        bf16_ours = bf16_theirs = equal_bf16
    elif precision == "default":
        bf16_ours = resolve_precision("auto", device) == torch.bfloat16
        bf16_theirs = equal_bf16
    elif precision == "bf16":
        bf16_ours = bf16_theirs = True
    else:
        raise ValueError(f"precision must be 'equal', 'default' or 'bf16', got {precision!r}")
    autocast_ours = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16_ours)
    autocast_theirs = torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16_theirs)

    def step_ours() -> None:
        with autocast_ours:
            loss = forward_ours(data).loss
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_theirs() -> None:
        with autocast_theirs:
            loss = theirs(**hf).loss
        loss.backward()
        opt_theirs.step()
        opt_theirs.zero_grad(set_to_none=True)

    timing = time_paired(
        step_ours, step_theirs, warmup=3 if compiled else 2, pairs=pairs, sync=_sync(device)
    )
    return {
        "loss_ptm": loss_ours,
        "loss_transformers": loss_theirs,
        "optimizer_ptm": describe_optimizer(opt_ours),
        "optimizer_transformers": describe_optimizer(opt_theirs),
        "ptm_compiled": compiled,
        **(
            {}
            if precision == "equal"
            else {
                "precision_ptm": "bf16 autocast" if bf16_ours else "fp32",
                "precision_transformers": "bf16 autocast" if bf16_theirs else "fp32",
            }
        ),
        **timing.summary(batch * length),
    }


def bench_inference(
    size: str, device: torch.device, batch: int, length: int, pairs: int, *, compiled: bool = False
) -> dict:
    """Encoder forward without gradients, tokens/s.

    ``compiled``: ptm runs through :func:`ptm_core.fast.compile_for_inference` (Inductor
    with weight freezing; compiled in the untimed warm-up, outputs checked equal to the
    eager encoder's first); transformers stays eager.
    """
    pair = build_pair(size)
    encoder, bert = pair.encoder.to(device).eval(), pair.theirs.bert.to(device).eval()
    data = make_batch(batch, length)
    ids, mask = data["input_ids"].to(device), data["attention_mask"].to(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    run_encoder: Any = encoder
    max_diff = None
    if compiled:
        from ptm_core.fast import compile_for_inference

        with torch.no_grad(), autocast:
            expected = encoder(ids, attention_mask=mask).last_hidden_state
        run_encoder = compile_for_inference(encoder)
        with autocast:
            got = run_encoder(ids, attention_mask=mask).last_hidden_state
        max_diff = (got.float() - expected.float()).abs().max().item()
        if device.type == "cpu" and max_diff > 1e-4:  # bf16 on CUDA: recorded, not checked
            raise RuntimeError(
                f"compiled ptm encoder differs from the eager one by {max_diff:.2e} ({size})"
            )

    def ours() -> None:
        with torch.no_grad(), autocast:
            run_encoder(ids, attention_mask=mask)

    def theirs() -> None:
        with torch.no_grad(), autocast:
            bert(input_ids=ids, attention_mask=mask)

    summary = time_paired(ours, theirs, pairs=pairs, sync=_sync(device)).summary(batch * length)
    if compiled:
        summary["ptm_compiled"] = "inductor, freezing"
        summary["max_abs_diff_vs_eager"] = max_diff
    return summary


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


def _label(name: str, r: dict[str, Any]) -> str:
    """The row label: the benchmark, then what is not the eager default on each side."""
    notes = []
    if r.get("ptm_compiled"):
        kind = r["ptm_compiled"] if isinstance(r["ptm_compiled"], str) else "torch.compile"
        notes.append(f"ptm compiled ({kind}), transformers eager")
    if "precision_ptm" in r:
        notes.append(f"ptm {r['precision_ptm']}, transformers {r['precision_transformers']}")
    if "optimizer_ptm" in r:
        notes.append(f"ptm {r['optimizer_ptm']}, transformers {r['optimizer_transformers']}")
    name = name.split(" [")[0]
    return f"{name} ({'; '.join(notes)})" if notes else name


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"Measured {results['date']} on {results['machine']} (torch {results['torch']}, "
        f"{results['threads']} threads). Command: `{results['command']}`.",
        *steal_note(results.get("cpu_steal_share")),
        "",
        "| benchmark | ptm | transformers | ptm / transformers |",
        "|---|---|---|---|",
    ]
    for name, r in results["benchmarks"].items():
        if "speedup_median" in r:
            lines.append(
                f"| {_label(name, r)}, tokens/s median | {r['ptm']['median']:.0f} | "
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


SUITES = {
    "headline": "ptm's default vs transformers sdpa in the same precision, share of the "
    "measured GEMM peak, whole-process memory (results/headline.md)",
    "train": "training step, each library's default optimizer (tokens/s)",
    "train-foreach": "training step, torch.optim.AdamW() (foreach) on both sides",
    "train-compiled": "training step, ptm through torch.compile (slow to compile on base)",
    "train-precision": "training step, ptm's default precision (bf16 where the CPU has it) "
    "vs transformers fp32, and both in bf16 autocast",
    "inference": "encoder forward without gradients",
    "inference-compiled": "encoder forward, ptm through ptm_core.fast.compile_for_inference",
    "memory": "peak training memory, one process per implementation",
    "xlnet": "XLNet permutation-LM training step vs transformers XLNetLMHeadModel",
    "visibility": "K-BERT visibility matrix vs padding mask on the same ptm encoder",
    "attention-masks": "structured masks (causal, prefix, packed, K-BERT, XLNet) per attention backend vs padding attention, ~10 min",
    "linking": "entity linking documents/s",
    "compression": "fine-tuned BERT-mini: fp32 vs int8 vs pruned heads vs ONNX Runtime (size, CPU latency, accuracy)",
    "data-pipeline": "prepared data (storage, prepare MB/s, scale): opt-in, 20+ min",
    "kepler": "KEPLER vs PyKEEN TransE vs random, link prediction on the sample KG: opt-in, ~10 min",
    "generations": "static vs ELMo features vs fine-tuned BERT on the gain tasks: opt-in, ~30 min",
    "static-scaling": "GloVe co-occurrence counting time/memory at 3 corpus sizes: opt-in, ~8 min",
    "gpu": "BERT-base/large seq 128/512 bf16 on CUDA vs transformers (sdpa), MFU, memory; "
    "unpadded vs padded; flex vs dense masks: runs only when CUDA is present",
}
# Suites that run as their own module and write their own results (benchmarks/results/<name>.md).
MODULE_SUITES = {
    "headline": ["benchmarks.headline"],
    "compression": ["benchmarks.compression", "--reuse"],
    "kepler": ["benchmarks.kepler_link_prediction", "--seeds", "0,1,2"],
    "generations": [
        "benchmarks.generations",
        "--seeds",
        "0",
        "1",
        "2",
        "--threads",
        "1",
        "--reuse",
    ],
    "static-scaling": ["benchmarks.static_scaling"],
    "attention-masks": ["benchmarks.attention_masks"],
    "gpu": ["benchmarks.gpu_suite"],
}
# The opt-in suites take long; `make bench` runs the others.
OPT_IN = {"data-pipeline", "kepler", "generations", "static-scaling"}
DEFAULT_SUITES = [s for s in SUITES if s not in OPT_IN]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__ + "\nsuites:\n" + "\n".join(f"  {k:20s}{v}" for k, v in SUITES.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--suite", nargs="*", default=DEFAULT_SUITES, choices=list(SUITES))
    parser.add_argument("--size", nargs="*", default=["mini", "base"])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--data-sizes", default="10MB,100MB", help="data-pipeline: corpus sizes (add 1GB)"
    )
    args = parser.parse_args()
    if args.quick:
        args.size, args.pairs = ["mini"], 4
        args.suite = [s for s in args.suite if s not in ("train-compiled", "train-foreach")]
    torch.set_num_threads(args.threads)
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_name(),
        "torch": torch.__version__,
        "threads": args.threads,
        "command": " ".join(["python -m benchmarks.run", *sys.argv[1:]]),
        "benchmarks": {},
    }
    bench = results["benchmarks"]
    steal = CpuSteal()
    shape = (args.batch, args.length, args.pairs)
    for device in devices:
        tag = device.type
        for size in args.size:
            train = partial(bench_train, size, device, *shape)
            inference = partial(bench_inference, size, device, *shape)
            runs: list[tuple[str, str, Callable[[], dict]]] = [
                ("train", f"train {size} {tag}", train),
                ("train-foreach", f"train {size} {tag}", partial(train, optimizers="foreach")),
                ("train-compiled", f"train {size} {tag}", partial(train, compiled=True)),
                (
                    "train-precision",
                    f"train {size} {tag} [default precision]",
                    partial(train, precision="default"),
                ),
                (
                    "train-precision",
                    f"train {size} {tag} [bf16 both]",
                    partial(train, precision="bf16"),
                ),
                ("inference", f"inference {size} {tag}", inference),
                (
                    "inference-compiled",
                    f"inference {size} {tag}",
                    partial(inference, compiled=True),
                ),
                ("memory", f"peak training memory {size} {tag}", partial(bench_memory, size, tag)),
                (
                    "xlnet",
                    f"XLNet train {size} {tag}",
                    partial(bench_xlnet_train, size, device, *shape),
                ),
            ]
            for suite, name, run in runs:
                if suite not in args.suite:
                    continue
                print(f"{suite} {size} {tag}", flush=True)
                # Variants of one benchmark differ in the label (optimizer, compiled) only.
                bench[
                    name
                    if suite in ("train", "inference", "memory", "xlnet", "train-precision")
                    else f"{name} [{suite}]"
                ] = run()
        if "visibility" in args.suite:
            bench[f"K-BERT visibility mini {tag}"] = bench_visibility(
                device, args.batch, args.length, args.pairs
            )
    if "linking" in args.suite:
        bench["entity linking (sample x10)"] = bench_linking()
    if "data-pipeline" in args.suite:
        # Its own process and result files (results/data_pipeline.md), like a separate run.
        subprocess.run(
            [sys.executable, "-m", "benchmarks.data_pipeline", "--sizes", args.data_sizes],
            check=True,
            cwd=Path(__file__).resolve().parents[1],
        )
    for suite, module in MODULE_SUITES.items():
        if suite == "gpu" and not torch.cuda.is_available():
            if suite in args.suite:
                print("gpu suite: no CUDA device here; skipped (run it on a GPU machine)")
            continue
        if suite in args.suite:
            subprocess.run(
                [sys.executable, "-m", *module], check=True, cwd=Path(__file__).resolve().parents[1]
            )
    if not set(args.suite) - {"data-pipeline", *MODULE_SUITES}:
        return  # only suites with their own result files
    results["cpu_steal_share"] = steal.share()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "latest.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
