"""Size, CPU speed and quality of a compressed fine-tuned BERT-mini classifier.

    nice -n 19 python -m benchmarks.compression                 # fine-tune once (cached), measure
    nice -n 19 python -m benchmarks.compression --threads 1 --repeats 15 --length 128

1. ``ptm finetune task=<--task> model=bert_mini`` (configs/model/bert_mini.yaml: 4 layers,
   256 wide, 4 heads, random init: no pre-trained BERT-mini ships offline), through
   :func:`flows.finetune.run_one` (the code path of ``ptm finetune``); the ``final/`` is cached
   under ``$PTM_BENCH_DIR/compression/`` and reused while it exists.
2. ``ptm compress`` (:func:`ptm_core.compress.compress_final`) makes the variants: dynamic
   int8, weight-only int8 and int4, heads pruned by Michel et al.'s importance on the dev set
   (30% and 50% of all heads, no re-training), the bottom 2 of 4 layers, and ONNX (dynamo
   exporter) run by ONNX Runtime.
3. Each variant: weight-file size; CPU latency of one forward at batch 1 and batch 32 on
   ``--length`` tokens (random ids, no padding), the median of ``--repeats`` timed calls (wall clock, and CPU time of
   the calling thread: ``time.thread_time``) after
   3 warm-up calls, variants interleaved call by call so that machine noise hits all alike;
   ``torch.set_num_threads(--threads)`` and ONNX Runtime ``intra_op_num_threads`` the same;
   the task's dev accuracy and the share of dev predictions equal to fp32's.

Writes ``benchmarks/results/compression.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.fixtures import BENCH_DIR, bench_env

RESULTS = Path(__file__).resolve().parent / "results"
# aten's weight-only kernels (_weight_int8pack_mm, _weight_int4pack_mm_for_cpu) are made for
# decoding (a few rows); at 32 x 128 rows they take many seconds per call on one thread.
NOT_TIMED_B32 = ("int8 weight-only", "int4 weight-only (g32)")
WORK = BENCH_DIR / "compression"


def finetuned_final(task: str, steps: int, lr: float, seed: int) -> Path:
    """The fine-tuned BERT-mini ``final/`` (cached)."""
    out = WORK / f"finetune-{task}-{steps}-{lr}-s{seed}"
    if (out / "final" / "task.json").is_file():
        print(f"fine-tuned model: reused {out / 'final'}", flush=True)
        return out / "final"
    from flows.finetune import run_one

    start = time.perf_counter()
    run = run_one(
        [
            f"task={task}",
            "model=bert_mini",
            f"seed={seed}",
            f"trainer.max_steps={steps}",
            f"trainer.learning_rate={lr}",
            f"trainer.output_dir={out}",
            "trainer.progress=false",
            f"trainer.save_every={steps}",
        ]
    )
    print(f"fine-tuned in {time.perf_counter() - start:.0f} s: {run['final_metrics']}", flush=True)
    return Path(run["final_dir"])


def dev_data(final: Path) -> tuple[Any, Any]:
    from ptm_core.finetune.recipe import load_finetuned
    from ptm_core.finetune.task_data import read_task

    _, tokenizer, task, record = load_finetuned(final)
    return task, read_task(task, "dev", tokenizer, record.get("label_names") or None)


@torch.no_grad()
def dev_predictions(run: Any, task: Any, data: Any) -> tuple[list[int], list[int], Tensor]:
    """Predicted classes, gold labels and the logits of ``run(batch) -> logits`` on dev."""
    from ptm_core.finetune.data.task_batches import TaskBatches

    batches = TaskBatches(data.rows, data.featurizer, 64, shuffle=False)
    predicted, gold, logits = [], [], []
    for batch in batches.iter_batches(0):
        out = run(batch)
        logits.append(out)
        predicted += out.argmax(-1).tolist()
        gold += batch["labels"].tolist()
    return predicted, gold, torch.cat(logits)


Tensor = torch.Tensor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="sentiment", help="a classification task preset")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--reuse", action="store_true", help="reuse compressed variants on disk")
    args = parser.parse_args()
    os.environ.update(bench_env())
    torch.set_num_threads(args.threads)

    from ptm_core.compress import compress_final, load_compressed, weight_bytes
    from ptm_core.compress.onnx_export import ONNX_FILE, onnx_session

    final = finetuned_final(args.task, args.steps, args.lr, args.seed)
    task, data = dev_data(final)
    methods: list[tuple[str, str, dict[str, Any]]] = [
        ("int8 (dynamic)", "int8", {}),
        ("int8 weight-only", "int8-weight", {}),
        ("int4 weight-only (g32)", "int4-weight", {}),
        ("pruned 30% heads", "prune-heads", {"fraction": 0.3}),
        ("pruned 50% heads", "prune-heads", {"fraction": 0.5}),
        ("bottom 2 of 4 layers", "drop-layers", {"keep": "bottom:2"}),
        ("ONNX Runtime", "onnx", {"exporter": "dynamo"}),
    ]
    variants: dict[str, dict[str, Any]] = {
        "fp32": {"dir": final, "summary": "the fine-tuned model"}
    }
    for label, method, options in methods:
        out = WORK / "variants" / f"{method}-{options.get('fraction', '')}".rstrip("-")
        record_path = out / "compression.json"
        if args.reuse and record_path.is_file():  # compressed by an earlier run of this final
            record = json.loads(record_path.read_text())
            print(f"{label}: reused {out}", flush=True)
        else:
            start = time.perf_counter()
            result = compress_final(final, out, method, **options)
            print(f"{label}: {result.summary()} ({time.perf_counter() - start:.0f} s)", flush=True)
            record = result.details["record"]
        variants[label] = {"dir": out}
        if method == "onnx":
            variants[label]["onnx_check_max_abs_diff"] = record["max_abs_diff"]

    runners: dict[str, Any] = {}
    fp32_model = load_compressed(final).model.eval()
    for label, info in variants.items():
        if label == "ONNX Runtime":
            session = onnx_session(Path(info["dir"]) / ONNX_FILE, threads=args.threads)
            names = [i.name for i in session.get_inputs()]

            def run(
                batch: dict[str, Tensor], session: Any = session, names: list[str] = names
            ) -> Tensor:
                feed = {n: batch[n].numpy() for n in names}
                return torch.from_numpy(session.run(None, feed)[0])

        else:
            model = fp32_model if label == "fp32" else load_compressed(info["dir"]).model.eval()

            def run(batch: dict[str, Tensor], model: Any = model) -> Tensor:
                return model(batch).logits

        runners[label] = run
        info["bytes"] = weight_bytes(info["dir"])

    # Quality: dev accuracy, agreement with fp32, and the largest logit difference.
    reference_pred, gold, reference_logits = dev_predictions(runners["fp32"], task, data)
    for label, run in runners.items():
        predicted, _, logits = dev_predictions(run, task, data)
        info = variants[label]
        info["accuracy"] = sum(p == g for p, g in zip(predicted, gold, strict=True)) / len(gold)
        info["agreement_with_fp32"] = sum(
            p == r for p, r in zip(predicted, reference_pred, strict=True)
        ) / len(gold)
        info["dev_logits_max_abs_diff_vs_fp32"] = float((logits - reference_logits).abs().max())

    # Speed: interleaved timed calls, median per variant.
    vocab = fp32_model.encoder.config.vocab_size
    for batch_size in (1, 32):
        generator = torch.Generator().manual_seed(batch_size)
        ids = torch.randint(5, vocab, (batch_size, args.length), generator=generator)
        batch = {
            "input_ids": ids,
            "attention_mask": torch.ones_like(ids),
            "token_type_ids": torch.zeros_like(ids),
        }
        timed = {
            label: run
            for label, run in runners.items()
            if batch_size == 1 or label not in NOT_TIMED_B32
        }
        times: dict[str, list[float]] = {label: [] for label in timed}
        cpu: dict[str, list[float]] = {label: [] for label in timed}
        with torch.no_grad():
            for run in timed.values():
                for _ in range(3):
                    run(batch)
            for _ in range(args.repeats):
                for label, run in timed.items():
                    start, start_cpu = time.perf_counter(), time.thread_time()
                    run(batch)
                    times[label].append(time.perf_counter() - start)
                    cpu[label].append(time.thread_time() - start_cpu)
        for label, values in times.items():
            variants[label][f"latency_ms_b{batch_size}"] = 1000 * statistics.median(values)
            variants[label][f"latency_ms_b{batch_size}_all"] = [1000 * v for v in values]
            variants[label][f"cpu_ms_b{batch_size}"] = 1000 * statistics.median(cpu[label])
        print(f"batch {batch_size}: timed", flush=True)

    base = variants["fp32"]
    for info in variants.values():
        for key in ("latency_ms", "cpu_ms"):
            for size in (1, 32):
                info.setdefault(f"{key}_b{size}", None)
        info["speedup_b1"] = base["latency_ms_b1"] / info["latency_ms_b1"]
        info["cpu_speedup_b1"] = base["cpu_ms_b1"] / info["cpu_ms_b1"]
        timed32 = info["latency_ms_b32"] is not None
        info["speedup_b32"] = base["latency_ms_b32"] / info["latency_ms_b32"] if timed32 else None
        info["cpu_speedup_b32"] = base["cpu_ms_b32"] / info["cpu_ms_b32"] if timed32 else None
        info["dir"] = str(info["dir"])
    int8 = variants["int8 (dynamic)"]
    onnx_diff = max(variants["ONNX Runtime"]["onnx_check_max_abs_diff"].values())
    results = {
        "command": "nice -n 19 python -m benchmarks.compression " + " ".join(sys.argv[1:]),
        "task": args.task,
        "finetune": {"model": "bert_mini (random init)", "steps": args.steps, "lr": args.lr},
        "final": str(final),
        "dev_examples": len(gold),
        "threads": args.threads,
        "length": args.length,
        "repeats": args.repeats,
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.1f} at the end",
        "targets": {
            "int8_speedup_b32": int8["speedup_b32"],
            "int8_speedup_b32_ok": int8["speedup_b32"] >= 1.5,
            "int8_cpu_speedup_b32": int8["cpu_speedup_b32"],
            "int8_accuracy_drop_points": 100 * (base["accuracy"] - int8["accuracy"]),
            "int8_accuracy_ok": 100 * (base["accuracy"] - int8["accuracy"]) <= 1.0,
            "onnx_max_abs_diff": max(
                onnx_diff, variants["ONNX Runtime"]["dev_logits_max_abs_diff_vs_fp32"]
            ),
            "onnx_ok": max(onnx_diff, variants["ONNX Runtime"]["dev_logits_max_abs_diff_vs_fp32"])
            <= 1e-4,
        },
        "variants": variants,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "compression.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (RESULTS / "compression.md").write_text(table)
    print(table)


def markdown(results: dict[str, Any]) -> str:
    """The size/speed/quality table."""
    lines = [
        "# Compression: fine-tuned BERT-mini classifier",
        "",
        f"Command: `{results['command']}`. Task `{results['task']}` "
        f"({results['dev_examples']} dev examples), BERT-mini fine-tuned from random init for "
        f"{results['finetune']['steps']} steps. CPU latency: one forward of "
        f"{results['length']} tokens, median of {results['repeats']} interleaved calls, "
        f"{results['threads']} thread(s) (torch and ONNX Runtime). {results['machine']}; the "
        "machine is shared, so latencies carry other jobs' noise.",
        "",
        "Wall-clock latency is what a user sees; CPU time of the calling thread (one thread, so "
        "the whole computation) is what the model costs, and is much less disturbed by other "
        "jobs on a shared machine. Speed-up = fp32 / variant.",
        "",
        "| variant | file MiB | b1 wall ms | b1 CPU ms | b32 wall ms | b32 CPU ms | "
        "speed-up b32 (wall / CPU) | dev accuracy | agrees with fp32 | max logit diff |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, v in results["variants"].items():
        if v["latency_ms_b32"] is None:
            lines.append(
                f"| {label} | {v['bytes'] / 2**20:.2f} | {v['latency_ms_b1']:.1f} | "
                f"{v['cpu_ms_b1']:.1f} | not timed | not timed | - | "
                f"{100 * v['accuracy']:.1f} | {100 * v['agreement_with_fp32']:.1f}% | "
                f"{v['dev_logits_max_abs_diff_vs_fp32']:.1e} |"
            )
            continue
        lines.append(
            f"| {label} | {v['bytes'] / 2**20:.2f} | {v['latency_ms_b1']:.1f} | "
            f"{v['cpu_ms_b1']:.1f} | {v['latency_ms_b32']:.0f} | {v['cpu_ms_b32']:.0f} | "
            f"{v['speedup_b32']:.2f}x / {v['cpu_speedup_b32']:.2f}x | "
            f"{100 * v['accuracy']:.1f} | {100 * v['agreement_with_fp32']:.1f}% | "
            f"{v['dev_logits_max_abs_diff_vs_fp32']:.1e} |"
        )
    t = results["targets"]
    lines += [
        "",
        f"Targets: int8 at batch 32 {t['int8_speedup_b32']:.2f}x faster in wall time "
        f"({t['int8_cpu_speedup_b32']:.2f}x in CPU time; target >= 1.5x: "
        f"{'met' if t['int8_speedup_b32_ok'] else 'NOT met'}), accuracy "
        f"{-t['int8_accuracy_drop_points']:+.1f} points (target >= -1: "
        f"{'met' if t['int8_accuracy_ok'] else 'NOT met'}); ONNX Runtime vs eager max |diff| "
        f"{t['onnx_max_abs_diff']:.1e} (target <= 1e-4: {'met' if t['onnx_ok'] else 'NOT met'}).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
