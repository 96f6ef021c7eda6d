"""``ptm analyze MODEL layers``: linear probes on every layer, with control tasks.

ptm analyze runs/demo/pretrain/final layers --conll tags.conll --column 1 --output analysis/pos
ptm analyze hf_bert/ layers --conll ner.txt --compare random-init --seeds 0,1,2 --output a/ner
ptm analyze runs/ernie/final layers --kg kg/ --text corpus.txt --output analysis/types
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

NAME = "layers"


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds {text!r}: give integers, e.g. 0,1,2") from None
    if not seeds:
        raise argparse.ArgumentTypeError("--seeds: give at least one seed, e.g. 0,1,2")
    return seeds


def add_probe_parser(probes: Any) -> None:
    """Add ``layers`` to ``ptm analyze``'s probes."""
    layers = probes.add_parser(
        NAME,
        help="linear probes per layer + scalar mix, with a control task (selectivity)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = layers.add_argument_group("labels (one of)")
    source.add_argument("--conll", default=None, help="CoNLL file: one word a line, its tags")
    source.add_argument(
        "--column",
        type=int,
        default=-1,
        help="the label's column, 0-based from the word (1 = POS in CoNLL-2003; -1 = last)",
    )
    source.add_argument(
        "--test-conll",
        default=None,
        help="with --conll: a CoNLL file that is the test split (--conll: train and dev)",
    )
    source.add_argument("--kg", default=None, help="KG folder whose entities.tsv has types")
    source.add_argument("--text", default=None, help="with --kg: text file, one text a line")
    layers.add_argument("--output", required=True, help="folder for layers.md/json/png")
    layers.add_argument(
        "--compare",
        default=None,
        help="a second model folder, or 'random-init' (this architecture, re-initialised)",
    )
    layers.add_argument(
        "--pooling",
        choices=("first", "mean"),
        default="first",
        help="a span's vector: its first word piece, or the mean of its pieces",
    )
    layers.add_argument("--seeds", type=_seeds, default=(0,), help="comma-separated (0,1,2)")
    layers.add_argument("--steps", type=int, default=300, help="probe training steps")
    layers.add_argument("--lr", type=float, default=0.01, help="probe learning rate")
    layers.add_argument("--weight-decay", type=float, default=0.0, help="L2 on the probes")
    layers.add_argument("--batch-size", type=int, default=32, help="texts per forward pass")
    layers.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:N]")
    layers.add_argument(
        "--max-texts",
        type=int,
        default=None,
        help="a seeded sample of at most N texts (each file): features are held in memory",
    )
    layers.add_argument(
        "--overwrite", action="store_true", help="replace an earlier ptm analysis at --output"
    )


def run_probe(args: argparse.Namespace) -> int:
    """Run the layer probes; print the table; 1 with one ``ptm:`` line on bad input."""
    from flows.analyze_layers import layers
    from ptm_core.analysis.layer_probes import ProbeSettings

    try:
        settings = ProbeSettings(
            steps=args.steps, learning_rate=args.lr, weight_decay=args.weight_decay
        )
        result = layers(
            args.model,
            args.output,
            conll=args.conll,
            column=args.column,
            test_conll=args.test_conll,
            kg=args.kg,
            text=args.text,
            compare=args.compare,
            pooling=args.pooling,
            seeds=args.seeds,
            settings=settings,
            batch_size=args.batch_size,
            max_texts=args.max_texts,
            device=args.device,
            overwrite=args.overwrite,
        )
    except (OSError, ValueError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    body = result["markdown"].split("\n![")[0]
    print(body.split("\n", 2)[2] if body.startswith("# ") else body)
    print(f"report: {result['output']}/layers.md")
    return 0
