"""``ptm extend-vocab MODEL --corpus FILE_OR_FOLDER --output OUT``: domain words as tokens.

Runs in this process; the library side is
:func:`ptm_core.checkpoints.extend_vocab.extend_vocabulary`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flows.cli_predict import positive_int

KIND = "extend-vocab"
HELP = "add a domain corpus's frequent split words to a model's vocabulary (BioBERT/SciBERT)"
DESCRIPTION = """Find the words of a domain corpus that MODEL's tokenizer splits into pieces,
add the most frequent ones as tokens of their own, and write the model with one new
embedding row per word (the mean of its old pieces' rows; old ids and rows unchanged) to
OUT, in MODEL's own format. Continue pre-training from it with init_from=OUT (DAPT, TAPT).

  ptm extend-vocab runs/bert_tiny/final --corpus data/pubmed.txt --output runs/bio_vocab
  ptm pretrain experiment=bert_tiny init_from=runs/bio_vocab data.corpus=data/pubmed.txt

Guide: docs/guides/domain-adaptation.md"""


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add ``extend-vocab`` to the ``ptm`` sub-commands."""
    parser = commands.add_parser(
        KIND,
        help=HELP,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model",
        metavar="MODEL",
        help="a ptm final/ or a Hugging Face BERT/RoBERTa folder (with its tokenizer)",
    )
    parser.add_argument(
        "--corpus",
        required=True,
        nargs="+",
        metavar="FILE_OR_FOLDER",
        help="domain text: files, folders or patterns (.txt, .jsonl, .gz/.zst, Arrow, Parquet)",
    )
    parser.add_argument("--output", "-o", required=True, metavar="OUT", help="the new model folder")
    parser.add_argument(
        "--max-new", type=positive_int, default=1000, help="most words added (default 1000)"
    )
    parser.add_argument(
        "--min-count",
        type=positive_int,
        default=5,
        help="fewest occurrences in the corpus of a word added (default 5)",
    )
    parser.add_argument("--text-field", default="text", help="JSONL key / Arrow column of text")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUT when it holds an earlier extend-vocab output (never another folder)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``ptm extend-vocab``; prints what was added and returns 0, or one ``ptm:`` line
    and 1 for bad input."""
    from ptm_core.atomic import DiskFullError
    from ptm_core.checkpoints.extend_vocab import extend_vocabulary

    try:
        result = extend_vocabulary(
            args.model,
            args.corpus,
            args.output,
            max_new=args.max_new,
            min_count=args.min_count,
            text_field=args.text_field,
            overwrite=args.overwrite,
        )
    except (ValueError, FileNotFoundError, DiskFullError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    shown = ", ".join(f"{w.word} ({w.count})" for w in result.words[:8])
    more = f" and {len(result.words) - 8} more" if len(result.words) > 8 else ""
    print(f"words added    {len(result.words)}: {shown}{more}")
    print(f"vocabulary     {result.old_size} -> {result.new_size} ids")
    print(f"tensors grown  {', '.join(result.grown)}")
    print(f"written        {result.output}")
    print(f"next           ptm pretrain experiment=bert_tiny init_from={result.output} ...")
    return 0
