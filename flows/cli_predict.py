"""``ptm predict MODEL INPUT``: batched inference with a fine-tuned model, streamed to a file.

ptm predict runs/kg_pair/final data/pairs.csv --output predictions.jsonl
ptm predict runs/kg_ner/final sentences.conll --format csv --batch-size 64

Runs in this process (no Prefect server); the library side is
:func:`ptm_core.finetune.predict_output.predict_file`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "predict with a fine-tuned final/ on a file (JSONL or CSV out, streamed)"
DESCRIPTION = """Predict with a fine-tuned final/ on every row of INPUT; write one record per row
(the row's columns, the prediction and its scores) as JSON Lines or CSV. Rows are read,
scored and written in chunks, so memory does not grow with the input.

  ptm predict runs/kg_pair/final data/pairs.csv --output predictions.jsonl
  ptm predict runs/kg_ner/final sentences.conll --format csv --batch-size 64

Guide: docs/guides/predict.md"""


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (a bad value fails before any work)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``predict`` to the ``ptm`` sub-commands."""
    parser = commands.add_parser(
        "predict",
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("model", help="a fine-tuned final/ folder (ptm finetune wrote it)")
    parser.add_argument(
        "input",
        help="rows to predict on: .tsv, .csv, .jsonl, .json, .parquet, a datasets folder "
        "(save_to_disk), a CoNLL file (tagging) or a SQuAD JSON file (qa)",
    )
    parser.add_argument(
        "--output", "-o", default=None, help="file to write (default <input>.predictions.jsonl)"
    )
    parser.add_argument(
        "--format", choices=("jsonl", "csv"), default=None, help="default: the output's suffix"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=None, help="default: task.eval_batch_size"
    )
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (GPUs, recent CPUs)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the output file if it exists"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``ptm predict``; prints a summary (rows, examples/s, output) and returns 0, or
    one ``ptm:`` line and 1 for bad input."""
    from ptm_core.atomic import DiskFullError
    from ptm_core.finetune.predict_output import predict_file

    def progress(rows: int, seconds: float) -> None:
        if sys.stderr.isatty():
            rate = rows / seconds if seconds > 0 else 0.0
            print(f"\rpredict: {rows} rows, {rate:,.0f} examples/s", end="", file=sys.stderr)

    try:
        stats = predict_file(
            args.model,
            args.input,
            args.output,
            format=args.format,
            batch_size=args.batch_size,
            device=args.device,
            bf16=args.bf16,
            overwrite=args.overwrite,
            progress=progress,
        )
    except (ValueError, FileNotFoundError, DiskFullError) as exc:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"task           {stats.kind}")
    print(f"examples       {stats.examples}")
    print(f"seconds        {stats.seconds:.2f}")
    print(f"examples/s     {stats.examples_per_second:,.1f}")
    print(f"predictions    {stats.output}")
    return 0


__all__ = ["add_parser", "run"]
