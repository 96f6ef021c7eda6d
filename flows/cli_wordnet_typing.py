"""``ptm wordnet-typing``: the WordNet entity-typing task with held-out entities.

ptm wordnet-typing runs/wordnet_typing                       # 6 lexnames, as many as balance allows
ptm wordnet-typing runs/wordnet_typing --labels 4 --per-label 200 --seed 1
ptm wordnet-typing runs/wt --lexnames noun.animal,noun.plant,noun.artifact

Writes ``train.tsv``, ``dev.tsv``, ``test.tsv`` (``label``, ``sentence``, ``entity``) for
``configs/task/wordnet_typing.yaml`` (``docs/knowledge/wordnet-typing.md``). The folder is
built aside and moved into place whole; an earlier output is replaced only with
``--overwrite``, a folder ptm did not write never.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from flows.cli_wordnet import add_wordnet_dir_argument
from ptm_core.atomic import DiskFullError

KIND = "wordnet-typing"


def add_parser(commands: Any) -> None:
    """Add ``wordnet-typing`` to the ``ptm`` sub-commands."""
    parser = commands.add_parser(
        KIND,
        help="write the WordNet entity-typing task (lexname of a held-out noun)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("output", help="the task folder to write (new, empty, or ptm's own)")
    add_wordnet_dir_argument(parser)
    parser.add_argument("--labels", type=int, default=6, help="the N most frequent lexnames")
    parser.add_argument("--lexnames", default=None, help="comma-separated lexnames instead")
    parser.add_argument("--per-label", type=int, default=None, help="entities per lexname")
    parser.add_argument("--held-out", type=float, default=0.2, help="dev (and test) fraction")
    parser.add_argument("--sentences", type=int, default=4, help="sentences per entity")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUTPUT when it holds an earlier one"
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ptm wordnet-typing``; returns the exit code (1 with one ``ptm:`` line)."""
    try:
        lines = _write(args)
    except (ValueError, FileNotFoundError, DiskFullError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _write(args: argparse.Namespace) -> list[str]:
    from ptm_core.atomic import atomic_directory, check_output_directory
    from ptm_knowledge.kg.wordnet import read_wordnet, wordnet_directory
    from ptm_knowledge.kg.wordnet_typing import build_wordnet_typing

    output = Path(args.output)
    check = {"kind": KIND, "overwrite": args.overwrite, "option": "--overwrite"}
    check_output_directory(output, **check)
    wordnet = read_wordnet(wordnet_directory(args.wordnet_dir))
    labels = [n.strip() for n in args.lexnames.split(",") if n.strip()] if args.lexnames else None
    task = build_wordnet_typing(
        wordnet,
        labels=labels or args.labels,
        per_label=args.per_label,
        held_out=args.held_out,
        sentences=args.sentences,
        seed=args.seed,
    )
    with atomic_directory(output, legacy=False, **check) as tmp:
        task.write(tmp)
    lines = [f"wordnet    {wordnet.directory} ({len(wordnet)} noun synsets)"]
    lines.append(f"labels     {', '.join(task.labels)}")
    for split, rows in task.splits.items():
        per = Counter(r.label for r in rows)
        entities = len(task.entities[split])
        lines.append(
            f"{split:<10} {len(rows)} rows, {entities} entities, {min(per.values())}/label"
        )
    lines.append(f"written    {output}/: train.tsv, dev.tsv, test.tsv")
    lines.append(
        f"use it     task=wordnet_typing task.train={output}/train.tsv task.dev={output}/dev.tsv"
    )
    return lines
