"""How fine-tuning data costs memory and time as the task file grows (issue #15).

    python -m benchmarks.task_data_scale                       # 10MB, 100MB, 1GB (~15 min)
    python -m benchmarks.task_data_scale --sizes 1MB,10MB      # quick look

ptm reads a task file lazily (:mod:`ptm_core.finetune.data.records`): one streaming pass
validates it and keeps each example's byte offset and line number (16 bytes an example);
each batch then seeks to its rows, parses and tokenizes them. Nothing is tokenized ahead and
nothing is cached, so the question is what that costs against the path a Hugging Face user
takes (``run_glue``: ``datasets.load_dataset`` + ``.map(tokenize)``, cached as Arrow).

For every size, a GLUE-style sentence-pair TSV and a CoNLL tagging file are generated from
:mod:`benchmarks.make_corpus` text (once, under ``--root``), and each side runs in a fresh
process whose whole process tree is polled for memory (:mod:`benchmarks.peak_rss`):
- ``ptm``: :func:`~ptm_core.finetune.task_data.read_task` (the validating pass), then the
  first ``--batches`` shuffled training batches of :class:`TaskBatches` (batch 32, 128
  pieces), as the trainer asks for them;
- ``datasets`` (GLUE only): ``load_dataset("csv", delimiter="\\t")`` + batched ``.map``
  with the same ``tokenizers`` backend into a fresh cache, then the same number of random
  batches gathered and padded; run twice, the second run reading its Arrow cache.

Memory is each worker's peak RSS above its RSS once imports and the tokenizer are loaded
(``VmHWM`` reset through ``/proc/self/clear_refs``), beside the tree's peak PSS. Results: ``benchmarks/results/task_data_scale.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.make_corpus import CorpusGenerator, parse_size
from benchmarks.peak_rss import reset_peak_rss, run_measured, status_kb

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path("/tmp/ptm-bench/task-data")
BATCH, LENGTH = 32, 128
TAGS = ["O", "B-ENT", "I-ENT"]


# ----------------------------------------------------------------------------- data


def _sentences(seed: int):
    generator = CorpusGenerator(seed=seed, fmt="txt")
    while True:
        for line in generator.chunk().split("\n"):
            if line:
                yield line


def write_task_file(out: Path, size: int, fmt: str, seed: int = 0) -> dict[str, Any]:
    """Write a GLUE pair TSV (``fmt="glue"``) or CoNLL file (``"conll"``) of ~``size`` bytes.

    Written to a temporary name and renamed; a ``.done`` marker makes it reusable.
    """
    marker = out.with_name(out.name + ".done")
    if out.exists() and marker.exists():
        return json.loads(marker.read_text())
    out.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed + 1)
    start, written, examples = time.perf_counter(), 0, 0
    tmp = out.with_name(f".{out.name}.tmp")
    sentences = _sentences(seed)
    with tmp.open("w", encoding="utf-8", newline="\n") as handle:
        if fmt == "glue":
            written += handle.write("index\tsentence1\tsentence2\tlabel\n")
        while written < size:
            lines: list[str] = []
            for _ in range(1000):
                first = next(sentences)
                if fmt == "glue":
                    label = "entailment" if rng.random() < 0.5 else "not_entailment"
                    index = examples + len(lines)
                    lines.append(f"{index}\t{first}\t{next(sentences)}\t{label}\n")
                else:
                    words = first.split()
                    tags = rng.choice(3, size=len(words), p=[0.8, 0.12, 0.08])
                    previous = 0
                    rows = []
                    for word, tag in zip(words, tags, strict=True):
                        tag = 1 if tag == 2 and previous == 0 else int(tag)
                        rows.append(f"{word} -X- -X- {TAGS[tag]}\n")
                        previous = tag
                    lines.append("".join(rows) + "\n")
            chunk = "".join(lines).encode("utf-8")
            if written + len(chunk) > size:  # the last chunk: stop at the first line past size
                sizes = np.cumsum([len(line.encode("utf-8")) for line in lines])
                keep = int(np.searchsorted(sizes, size - written)) + 1
                lines = lines[:keep]
                chunk = "".join(lines).encode("utf-8")
            handle.write(chunk.decode("utf-8"))
            written += len(chunk)
            examples += len(lines)
    tmp.replace(out)
    stats = {"bytes": written, "examples": examples, "seconds": time.perf_counter() - start}
    marker.write_text(json.dumps(stats) + "\n")
    return stats


def ensure_tokenizer(root: Path, text: Path) -> Path:
    """A WordPiece vocabulary of 8,000 trained once on the first task file's sentences."""
    directory = root / "tokenizer"
    if (directory / "vocab.txt").exists():
        return directory
    from ptm_core.tokenization import WordPieceTokenizer

    def texts():
        with text.open(encoding="utf-8") as handle:
            next(handle)
            for line in handle:
                yield from line.split("\t")[1:3]

    tmp = root / ".tokenizer.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    WordPieceTokenizer.train(texts(), vocab_size=8000).save(tmp)
    tmp.replace(directory)
    return directory


# ----------------------------------------------------------------------------- workers


def _ptm_worker(args: argparse.Namespace) -> dict[str, Any]:
    from ptm_core.finetune.data.task_batches import TaskBatches
    from ptm_core.finetune.task_data import read_task
    from ptm_core.finetune.task_spec import TaskSpec
    from ptm_core.tokenization import WordPieceTokenizer

    tokenizer = WordPieceTokenizer.from_directory(args.tokenizer)
    glue = args.format == "glue"
    task = TaskSpec(
        name="scale",
        kind="classification" if glue else "tagging",
        train=str(args.path),
        dev=str(args.path),
        text_fields=["sentence1", "sentence2"] if glue else None,
        max_length=LENGTH,
    )
    base_kb = reset_peak_rss()
    start = time.perf_counter()
    data = read_task(task, "train", tokenizer)
    index_s = time.perf_counter() - start
    batches = TaskBatches(data.rows, data.featurizer, BATCH, seed=0, shuffle=True)
    start = time.perf_counter()
    tokens = 0
    for i, batch in enumerate(batches.iter_batches(0)):
        tokens += int(batch["attention_mask"].sum())
        if i + 1 == args.batches:
            break
    batch_s = time.perf_counter() - start
    return {
        "peak_above_start_mb": (status_kb("VmHWM") - base_kb) / 1024,
        "examples": len(data.rows),
        "ready_s": index_s,
        "batches_s": batch_s,
        "ms_per_batch": 1000 * batch_s / args.batches,
        "tokens_per_s": tokens / batch_s,
    }


def _datasets_worker(args: argparse.Namespace) -> dict[str, Any]:
    import csv

    import torch
    from datasets import disable_progress_bars, load_dataset

    from ptm_core.tokenization import WordPieceTokenizer

    disable_progress_bars()
    backend = WordPieceTokenizer.from_directory(args.tokenizer).backend
    backend.enable_truncation(LENGTH)
    base_kb = reset_peak_rss()
    start = time.perf_counter()
    data = load_dataset(
        "csv",
        data_files=str(args.path),
        delimiter="\t",
        quoting=csv.QUOTE_NONE,
        cache_dir=str(args.cache),
        split="train",
    )

    def tokenize(rows: dict[str, list[Any]]) -> dict[str, Any]:
        pairs = list(zip(rows["sentence1"], rows["sentence2"], strict=True))
        encodings = backend.encode_batch(pairs)
        return {
            "input_ids": [e.ids for e in encodings],
            "token_type_ids": [e.type_ids for e in encodings],
            "labels": [int(label == "entailment") for label in rows["label"]],
        }

    data = data.map(tokenize, batched=True, remove_columns=data.column_names)
    ready_s = time.perf_counter() - start
    order = np.random.default_rng(0).permutation(len(data))
    start = time.perf_counter()
    tokens = 0
    for i in range(args.batches):
        rows = data[order[i * BATCH : (i + 1) * BATCH]]
        width = max(len(ids) for ids in rows["input_ids"])
        ids = torch.zeros(len(rows["input_ids"]), width, dtype=torch.long)
        for r, row in enumerate(rows["input_ids"]):
            ids[r, : len(row)] = torch.tensor(row)
        tokens += int((ids != 0).sum())
    batch_s = time.perf_counter() - start
    return {
        "peak_above_start_mb": (status_kb("VmHWM") - base_kb) / 1024,
        "examples": len(data),
        "ready_s": ready_s,
        "batches_s": batch_s,
        "ms_per_batch": 1000 * batch_s / args.batches,
        "tokens_per_s": tokens / batch_s,
    }


def worker(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(2)
    result = _datasets_worker(args) if args.worker == "datasets" else _ptm_worker(args)
    print("RESULT " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------- driver


def measure(side: str, fmt: str, path: Path, tokenizer: Path, batches: int, **extra: Any):
    command = [sys.executable, "-m", "benchmarks.task_data_scale", "--worker", side]
    command += ["--format", fmt, "--tokenizer", str(tokenizer), "--batches", str(batches)]
    command += ["--path", str(path)]
    for key, value in extra.items():
        command += [f"--{key}", str(value)]
    measured = run_measured(command, timeout=3600)
    lines = [line for line in measured.output.splitlines() if line.startswith("RESULT ")]
    if measured.returncode != 0 or not lines:
        raise RuntimeError(f"{side} {fmt} {path} failed:\n{measured.output}")
    return {**json.loads(lines[-1][len("RESULT ") :]), **measured.to_dict()}


def run(sizes: list[str], root: Path, batches: int) -> dict[str, Any]:
    results: dict[str, Any] = {"batches": batches, "batch": BATCH, "length": LENGTH, "rows": []}
    files = {}
    for size in sizes:
        for fmt in ("glue", "conll"):
            path = root / f"{fmt}-{size}.{'tsv' if fmt == 'glue' else 'txt'}"
            stats = write_task_file(path, parse_size(size), fmt)
            files[size, fmt] = (path, stats)
            print(f"{path}: {stats['bytes'] / 1e6:.0f} MB, {stats['examples']:,} examples")
    tokenizer = ensure_tokenizer(root, files[sizes[0], "glue"][0])
    for size in sizes:
        for fmt in ("glue", "conll"):
            path, stats = files[size, fmt]
            sides = [("ptm", {})]
            if fmt == "glue":
                cache = root / f"hf-cache-{size}"
                shutil.rmtree(cache, ignore_errors=True)
                sides += [("datasets", {"cache": cache}), ("datasets (cached)", {"cache": cache})]
            for side, extra in sides:
                row = measure(side.split()[0], fmt, path, tokenizer, batches, **extra)
                row.update(size=size, format=fmt, side=side, bytes=stats["bytes"])
                results["rows"].append(row)
                print(
                    f"{size} {fmt} {side}: ready {row['ready_s']:.1f}s, "
                    f"{row['ms_per_batch']:.1f} ms/batch, +{row['peak_above_start_mb']:.0f} MiB"
                )
            if fmt == "glue":
                shutil.rmtree(root / f"hf-cache-{size}", ignore_errors=True)
    return results


def markdown(results: dict[str, Any]) -> str:
    out = [
        "# Task data: memory and time as the file grows",
        "",
        f"`python -m benchmarks.task_data_scale` (fresh process per row, whole tree polled; "
        f"batch {results['batch']}, {results['length']} pieces, first {results['batches']} "
        "shuffled batches). 'memory' is the process's peak RSS (`VmHWM`, reset once "
        "imports and the tokenizer are loaded) above its RSS at that point; 'tree PSS' is "
        "the peak over the process and any workers, imports included. 'ready' is the time "
        "before the first batch can be drawn: ptm's validating pass; datasets' load + "
        "tokenize (or its cache read).",
        "",
        "| size | format | side | examples | ready (s) | ms / batch | tokens/s | memory (MiB) "
        "| tree PSS (MiB) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        out.append(
            f"| {row['size']} | {row['format']} | {row['side']} | {row['examples']:,} | "
            f"{row['ready_s']:.1f} | {row['ms_per_batch']:.1f} | {row['tokens_per_s']:,.0f} | "
            f"{row['peak_above_start_mb']:.0f} | {row['peak_tree_pss_mb']:.0f} |"
        )
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10MB,100MB,1GB")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--worker", choices=["ptm", "datasets"], help=argparse.SUPPRESS)
    parser.add_argument("--format", choices=["glue", "conll"], help=argparse.SUPPRESS)
    parser.add_argument("--path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--cache", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results = run([s.strip() for s in args.sizes.split(",")], args.root, args.batches)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "task_data_scale.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "task_data_scale.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
