"""``ptm analyze MODEL representations|attention|heads``: layers and heads, with pictures.

ptm analyze runs/x/final representations --output analysis/repr
ptm analyze runs/x/final representations --compare runs/task/final --output analysis/vs
ptm analyze runs/x/final attention --sentences my.txt --mark-tokens paris,france --output a/
ptm analyze runs/bert/final attention --kg kg/ --output a/kbert   (K-BERT branch tokens)
ptm analyze runs/ernie_thu/final attention --kg --output a/ernie  (entity-aligned tokens)
ptm analyze runs/task/final heads --output analysis/heads
ptm compress runs/task/final --method prune-heads --importance analysis/heads/heads.json ...

Three sub-commands, not one with modes: each reads different inputs (any encoder and
sentences; two encoders with one tokenizer; a fine-tuned task with labelled data) and
writes its own report. See docs/guides/representations.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flows.analyze_repr import DEFAULT_SENTENCES, PROBES

SENTENCES_HELP = f"a text file, one sentence a line (default: the sample {DEFAULT_SENTENCES})"


def _common(parser: Any, what: str) -> None:
    parser.add_argument("--output", required=True, help=f"folder for {what}.md/json and PNGs")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an earlier ptm analysis at --output"
    )


def _sentences(parser: Any, batch_size: int) -> None:
    parser.add_argument("--sentences", default=DEFAULT_SENTENCES, help=SENTENCES_HELP)
    parser.add_argument("--max-sentences", type=int, default=500, help="read at most N (0: all)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per sentence")
    parser.add_argument("--batch-size", type=int, default=batch_size)


def add_probe_parser(probes: Any) -> None:
    """Add ``representations``, ``attention`` and ``heads`` to ``ptm analyze``'s probes."""
    repr_ = probes.add_parser(
        "representations",
        help="anisotropy per layer and linear CKA between layers (of two models)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(repr_, "representations")
    _sentences(repr_, 32)
    repr_.add_argument(
        "--compare", default=None, help="a second model with the same tokenizer, for CKA"
    )
    repr_.add_argument("--pairs", type=int, default=2000, help="token pairs for anisotropy")
    repr_.add_argument("--max-tokens", type=int, default=4000, help="tokens CKA runs on")
    repr_.add_argument("--seed", type=int, default=0)
    attn = probes.add_parser(
        "attention", help="per-head attention entropy and mass on [CLS], [SEP], marked tokens"
    )
    _common(attn, "attention")
    _sentences(attn, 16)
    attn.add_argument(
        "--mark-tokens",
        default="",
        help="comma-separated tokens (as the tokenizer writes them) whose attention is reported",
    )
    attn.add_argument(
        "--kg",
        nargs="?",
        const="",
        default=None,
        help="mass on knowledge tokens: K-BERT sentence trees with branches from this KG (any "
        "encoder or a K-BERT final/), ERNIE-THU's entity-aligned tokens linked against it; "
        "--kg alone: the KG the folder records",
    )
    heads = probes.add_parser(
        "heads", help="head importance (Michel et al.) vs single-head ablation, fine-tuned task"
    )
    _common(heads, "heads")
    heads.add_argument("--data", default=None, help="labelled file (default: the task's dev)")
    heads.add_argument("--batch-size", type=int, default=8)


def run_probe(args: argparse.Namespace) -> int:
    """Run the probe, print where the report is; 1 with one ``ptm:`` line on bad input."""
    from flows import analyze_repr

    for name in ("max_sentences", "max_length", "batch_size", "pairs", "max_tokens"):
        value = getattr(args, name, None)
        if value is not None and value < (0 if name == "max_sentences" else 1):
            print(f"ptm: --{name.replace('_', '-')} is {value}; give 1 or more", file=sys.stderr)
            return 2
    settings: dict[str, Any] = {"overwrite": args.overwrite}
    if args.probe != "heads":
        settings.update(
            sentences=args.sentences,
            max_sentences=args.max_sentences or None,
            max_length=args.max_length,
            batch_size=args.batch_size,
        )
    if args.probe == "representations":
        settings.update(
            compare=args.compare, pairs=args.pairs, max_tokens=args.max_tokens, seed=args.seed
        )
    elif args.probe == "attention":
        settings["mark_tokens"] = [t for t in args.mark_tokens.split(",") if t]
        settings["kg"] = args.kg
    else:
        settings.update(data=args.data, batch_size=args.batch_size)
    work = getattr(analyze_repr, args.probe)
    try:
        result = work(args.model, args.output, **settings)
    except (OSError, ValueError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    text = result["markdown"]
    body = text.split("\n", 2)[2] if text.startswith("# ") else text
    print("\n".join(line for line in body.splitlines() if not line.startswith("![")).strip())
    print(f"report: {result['output']}/{args.probe}.md ({', '.join(PROBES[args.probe])})")
    return 0
