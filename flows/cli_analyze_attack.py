"""``ptm analyze MODEL attack``: a TextFooler-style word-substitution attack.

ptm analyze runs/sst/final attack --data dev.tsv --embeddings runs/w2v/final --output adv/
ptm analyze runs/sst/final attack --data dev.tsv --mlm runs/bert/final \\
    --max-perturbed 0.2 --budgets 0,0.05,0.1 --output adv/
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _shares(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give shares of the words, comma-separated (0,0.05,0.1,0.2)"
        ) from None


def add_probe_parser(probes: Any) -> None:
    """Add ``attack`` to ``ptm analyze``'s probes."""
    attack = probes.add_parser(
        "attack",
        help="word-substitution attack on a fine-tuned classifier (TextFooler)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    attack.add_argument(
        "--data", required=True, help="labelled file in the task's format (TSV, CSV, JSONL, ...)"
    )
    attack.add_argument("--output", required=True, help="folder for attack.md/json/png")
    attack.add_argument(
        "--embeddings", default=None, help="word-vector table folder (word2vec/GloVe final/)"
    )
    attack.add_argument(
        "--mlm", default=None, help="folder with a masked-LM head: its predictions as candidates"
    )
    attack.add_argument(
        "--mlm-filter",
        action="store_true",
        help="also attack with the MLM's words whose cosine to the word in --embeddings is "
        "at least --min-similarity",
    )
    attack.add_argument(
        "--max-perturbed",
        type=float,
        default=0.2,
        help="share of each text's words that may change (default 0.2)",
    )
    attack.add_argument(
        "--budgets",
        type=_shares,
        default=[],
        help="more shares to report, comma-separated (the accuracy-vs-budget curve)",
    )
    attack.add_argument("--max-words", type=int, default=None, help="also at most N words")
    attack.add_argument(
        "--candidates", type=int, default=50, help="substitutes tried per word (default 50)"
    )
    attack.add_argument(
        "--min-similarity",
        type=float,
        default=0.5,
        help="lowest cosine of an embedding neighbour (default 0.5)",
    )
    attack.add_argument(
        "--max-examples", type=int, default=None, help="a seeded sample of N examples"
    )
    attack.add_argument("--seed", type=int, default=0)
    attack.add_argument("--batch-size", type=int, default=None)
    attack.add_argument(
        "--show", type=int, default=10, help="successful attacks shown per source (default 10)"
    )
    attack.add_argument(
        "--overwrite", action="store_true", help="replace an earlier ptm analysis at --output"
    )


def run_probe(args: argparse.Namespace) -> int:
    """Run the attack; print its table; 1 with one ``ptm:`` line on bad input."""
    from flows.analyze_attack import attack

    try:
        result = attack(
            args.model,
            args.data,
            args.output,
            embeddings=args.embeddings,
            mlm=args.mlm,
            mlm_filter=args.mlm_filter,
            max_perturbed=args.max_perturbed,
            budgets=args.budgets,
            max_words=args.max_words,
            candidates=args.candidates,
            min_similarity=args.min_similarity,
            max_examples=args.max_examples,
            seed=args.seed,
            batch_size=args.batch_size,
            shown=args.show,
            overwrite=args.overwrite,
        )
    except (OSError, ValueError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    text = result["markdown"].split("\n![")[0]
    print(text.split("\n", 2)[2] if text.startswith("# ") else text)
    print(f"report: {result['output']}/attack.md")
    return 0
