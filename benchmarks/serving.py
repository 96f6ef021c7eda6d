"""Batched encoder inference for users who serve: ptm against transformers, paired (issue #36).

    nice -n 10 python -m benchmarks.serving                      # BERT-mini and BERT-base shapes
    nice -n 10 python -m benchmarks.serving --sizes mini --examples 256 --repeats 2

One sequence classifier per size, random weights (speed does not depend on them), made
once as a ptm ``final/`` (``ptm_core.finetune.recipe.finetune``, one step) and exported with
``ptm export --format hf``, so every arm runs the same weights on the same inputs:

- ``ptm``: :class:`~ptm_core.finetune.predict.TaskPredictor` (what ``ptm predict`` runs):
  fp32, and ``bf16`` autocast;
- ``transformers sdpa + bf16``: ``BertForSequenceClassification`` with
  ``attn_implementation="sdpa"`` under the same bf16 autocast, batches sorted by length
  as ptm sorts them (its fastest equivalent setting), and the same in fp32;
- ``transformers pipeline``: ``pipeline("text-classification", batch_size=32)`` as a user
  calls it (fp32, input order);
- ``ptm onnx`` (``ptm compress --method onnx``, ONNX Runtime) and ``ptm int8``
  (``ptm compress --method int8``, dynamic int8 linears).

Inputs: single sentences whose lengths in word pieces follow a log-normal spread clipped to
8..128 (median ~30), the shape of GLUE-like text. Each repeat runs every arm once on the
same examples in a rotated order (pairs see the same machine state); throughput is
examples/s over the whole set (batch 32), latency the p50/p99 of one request of one
example. Results: ``benchmarks/results/serving.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.gemm_peak import gemm_peak

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[1]
VOCAB = REPO / "data_specs/text_corpus/sample-vocab.txt"
BATCH = 32
SIZES = {
    "mini": {"hidden_size": 256, "num_layers": 4, "num_heads": 4, "intermediate_size": 1024},
    "base": {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072},
}


def sentences(count: int, seed: int = 0) -> list[str]:
    """``count`` sentences of the sample vocabulary's whole words, log-normal lengths."""
    words = [
        w
        for w in VOCAB.read_text(encoding="utf-8").split()
        if w.isalpha() and not w.startswith("[")
    ]
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(mean=np.log(28), sigma=0.6, size=count), 8, 126)
    return [" ".join(rng.choice(words, size=int(n))) for n in lengths]


def build(size: str, root: Path) -> tuple[Path, Path, Path, Path]:
    """``(ptm final/, HF folder, ONNX folder, int8 folder)`` of a random classifier."""
    from flows.cli import main
    from ptm_core.encoders.presets import bert_encoder
    from ptm_core.finetune.recipe import finetune
    from ptm_core.finetune.task_spec import TaskSpec
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_core.training import TrainerConfig

    run = root / size
    final, hf, onnx, int8 = run / "final", run / "hf", run / "onnx", run / "int8"
    if not (final / "task.json").exists():
        tokenizer = WordPieceTokenizer.from_vocab(VOCAB)
        torch.manual_seed(0)
        encoder = bert_encoder(vocab_size=tokenizer.vocab_size, max_positions=512, **SIZES[size])
        root.mkdir(parents=True, exist_ok=True)
        data = root / "task.tsv"
        rows = [f"{s}\t{'a' if i % 2 else 'b'}" for i, s in enumerate(sentences(64, seed=9))]
        data.write_text("sentence\tlabel\n" + "\n".join(rows) + "\n", encoding="utf-8")
        task = TaskSpec(
            name="serve",
            kind="classification",
            train=str(data),
            dev=str(data),
            max_length=128,
            eval_batch_size=BATCH,
        )
        trainer = TrainerConfig(output_dir=str(run), max_steps=1, progress=False)
        finetune(task, encoder=encoder, tokenizer=tokenizer, trainer=trainer)
    for argv, out in (
        (["export", "--format", "hf", str(final), str(hf)], hf),
        (["compress", str(final), "--method", "onnx", "--output", str(onnx)], onnx),
        (["compress", str(final), "--method", "int8", "--output", str(int8)], int8),
    ):
        if not out.exists() and main(argv) != 0:
            raise SystemExit(f"{' '.join(argv)} failed")
    return final, hf, onnx, int8


Arm = Callable[[list[str]], None]


def ptm_arm(final: Path, bf16: bool, texts: list[str]) -> Arm:
    """``TaskPredictor.predict`` (``ptm predict``'s model call) on rows read from a file."""
    from ptm_core.finetune.predict import TaskPredictor

    predictor = TaskPredictor(final, batch_size=BATCH, bf16=bf16)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "rows.tsv"
        path.write_text("sentence\n" + "\n".join(texts) + "\n", encoding="utf-8")
        rows = dict(zip(texts, predictor.rows(path), strict=True))

    def run(batch: list[str]) -> None:
        predictor.predict([rows[t] for t in batch])

    return run


def hf_arm(folder: Path, bf16: bool) -> Arm:
    import transformers

    model = transformers.BertForSequenceClassification.from_pretrained(
        folder, attn_implementation="sdpa"
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)

    def run(texts: list[str]) -> None:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            for start in range(0, len(order), BATCH):
                chunk = [texts[i] for i in order[start : start + BATCH]]
                batch = tokenizer(
                    chunk, padding=True, truncation=True, max_length=128, return_tensors="pt"
                )
                model(**batch).logits.float()

    return run


def pipeline_arm(folder: Path) -> Arm:
    import transformers

    classify = transformers.pipeline("text-classification", model=str(folder), device=-1)

    def run(texts: list[str]) -> None:
        classify(texts, batch_size=BATCH, truncation=True, max_length=128)

    return run


def onnx_arm(folder: Path, final: Path) -> Arm:
    from ptm_core.compress.onnx_export import onnx_session
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    record = json.loads((folder / "compression.json").read_text(encoding="utf-8"))
    session = onnx_session(folder / "model.onnx", threads=torch.get_num_threads())
    tokenizer = load_task_tokenizer(final)
    names = list(record["inputs"])

    def run(texts: list[str]) -> None:
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            encoded = tokenizer.encode_batch(
                [texts[i] for i in order[start : start + BATCH]], max_length=128
            )
            width = max(len(e.input_ids) for e in encoded)
            feed = {}
            for name in names:
                rows = [list(getattr(e, name)) + [0] * (width - len(e.input_ids)) for e in encoded]
                feed[name] = np.asarray(rows, dtype=np.int64)
            session.run(None, feed)

    return run


def timed(arm: Arm, texts: list[str]) -> float:
    start = time.perf_counter()
    arm(texts)
    return time.perf_counter() - start


def latencies(arm: Arm, texts: list[str]) -> tuple[float, float]:
    """p50 and p99 in ms of one request of one example."""
    times = sorted(timed(arm, [t]) * 1000 for t in texts)
    return times[len(times) // 2], times[min(len(times) - 1, int(0.99 * len(times)))]


def measure(size: str, root: Path, examples: int, repeats: int, requests: int) -> dict[str, Any]:
    final, hf, onnx, int8 = build(size, root)
    texts = sentences(examples)
    arms: dict[str, Arm] = {
        "ptm bf16": ptm_arm(final, bf16=True, texts=texts),
        "ptm fp32": ptm_arm(final, bf16=False, texts=texts),
        "transformers sdpa + bf16": hf_arm(hf, bf16=True),
        "transformers sdpa fp32": hf_arm(hf, bf16=False),
        "transformers pipeline (fp32)": pipeline_arm(hf),
        "ptm onnx (ONNX Runtime fp32)": onnx_arm(onnx, final),
        "ptm int8 (dynamic)": ptm_arm(int8, bf16=False, texts=texts),
    }
    for arm in arms.values():  # warm-up: first-call allocations, lazy imports
        arm(texts[:BATCH])
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            seconds[name].append(timed(arms[name], texts))
            print(f"{size} repeat {r + 1}/{repeats}: {name} {seconds[name][-1]:.2f} s", flush=True)
    single = texts[:requests]
    rows = []
    for name, arm in arms.items():
        p50, p99 = latencies(arm, single)
        best = min(seconds[name])
        rows.append(
            {
                "arm": name,
                "examples_per_s": round(examples / best, 1),
                "examples_per_s_median": round(examples / statistics.median(seconds[name]), 1),
                "latency_p50_ms": round(p50, 2),
                "latency_p99_ms": round(p99, 2),
            }
        )
        print(f"{size}: {rows[-1]}", flush=True)
    reference = next(r for r in rows if r["arm"] == "transformers sdpa + bf16")
    for row in rows:
        row["vs_transformers_sdpa_bf16"] = round(
            row["examples_per_s"] / reference["examples_per_s"], 2
        )
        if row["arm"] in BF16_ARMS:  # executed FLOPs (ptm's are of the real tokens only)
            flops = counted_flops(arms[row["arm"]], texts)
            row["gflop"] = round(flops / 1e9, 1)
            row["gflop_per_s"] = round(flops / min(seconds[row["arm"]]) / 1e9, 1)
    return {"size": size, "shape": SIZES[size], "examples": examples, "rows": rows}


#: The arms set against the bf16 matrix-multiply peak (the others run fp32 or int8).
BF16_ARMS = ("ptm bf16", "transformers sdpa + bf16")


def counted_flops(arm: Arm, texts: list[str]) -> int:
    """Matrix FLOPs (GEMMs and attention) one pass of ``arm`` over ``texts`` executes."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        arm(texts)
    return int(counter.get_total_flops())


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Serving: batched encoder inference, ptm against transformers",
        "",
        f"`{result['command']}` on {result['cpu']}, {result['threads']} torch threads, load "
        f"average {result['load_before']} before and {result['load_after']} after (other "
        "work shared the machine: compare the arms of one size, measured interleaved, not "
        "the absolute rates). Batch 32, single sentences with log-normal lengths (8-126 "
        "words, median 28), length-sorted batches for every arm but the pipeline. "
        "Throughput: the best of the repeats (median beside it); latency: one request of "
        "one example.",
        "",
        f"bf16 matrix-multiply peak of this CPU on {result['threads']} threads "
        f"(`benchmarks.gemm_peak`, measured at the start and the end of the run, the higher "
        f"kept): {result['gemm_peak_gflops']} GFLOP/s. *Share of peak* is a bf16 arm's "
        "executed FLOP/s (`FlopCounterMode` over one pass: GEMMs and attention; ptm's are "
        "of the real tokens only, GFLOP per pass beside it) at its best throughput, against "
        "that peak. The ratio of two bf16 arms is their shares' ratio times the ratio of "
        "the FLOPs they execute; no arm can pass 100%.",
        "",
    ]
    for size in result["sizes"]:
        lines += [
            f"## BERT-{size['size']} ({size['shape']['num_layers']} x "
            f"{size['shape']['hidden_size']}), {size['examples']} examples",
            "",
            "| arm | examples/s (best) | median | vs transformers sdpa + bf16 | share of peak "
            "| p50 ms | p99 ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in size["rows"]:
            share = (
                f"{100 * row['gflop_per_s'] / result['gemm_peak_gflops']:.0f}% "
                f"({row['gflop']:.0f} GFLOP)"
                if "gflop_per_s" in row
                else ""
            )
            lines.append(
                f"| {row['arm']} | {row['examples_per_s']} | {row['examples_per_s_median']} | "
                f"{row['vs_transformers_sdpa_bf16']}x | {share} | {row['latency_p50_ms']} | "
                f"{row['latency_p99_ms']} |"
            )
        lines.append("")
    lines.append(result.get("note", ""))
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="mini,base")
    parser.add_argument("--examples", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--root", default=None, help="where the models are made (kept)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    root = Path(args.root or tempfile.mkdtemp(prefix="ptm-serving-"))
    load_before = round(os.getloadavg()[0], 1)
    peak_before = gemm_peak(args.threads)
    sizes = [
        measure(s, root, args.examples, args.repeats, args.requests) for s in args.sizes.split(",")
    ]
    result = {
        "command": "python -m benchmarks.serving "
        + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v is not None and k != "root"),
        "cpu": _cpu(),
        "threads": args.threads,
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 1),
        "gemm_peak_gflops": round(max(peak_before, gemm_peak(args.threads))),
        "sizes": sizes,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "serving.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / "serving.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))


if __name__ == "__main__":
    main()
