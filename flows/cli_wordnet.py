"""``ptm wordnet-kg``: WordNet 3.0 as a ptm knowledge graph (full, or WN18RR-style).

ptm wordnet-kg kg/wordnet                       # every noun synset and its relations
ptm wordnet-kg kg/wordnet-all --pos all         # nouns, verbs, adjectives, adverbs
ptm wordnet-kg kg/wn18rr --style wn18rr --seed 0  # + train/valid/test.tsv (WN18RR-style)
ptm wordnet-kg kg/wn18rr-t --style wn18rr --grouping triple  # split each triple alone, as WN18RR

The folder is built aside and moved into place whole (``ptm_core.atomic``): an earlier
output is replaced only with ``--overwrite``, a folder ptm did not write never.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ptm_core.atomic import DiskFullError

KIND = "wordnet-kg"
_POS = {"n": ("n",), "all": ("n", "v", "a", "r")}


def add_wordnet_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--wordnet-dir``, as every WordNet command takes it."""
    parser.add_argument(
        "--wordnet-dir",
        default=None,
        help="WordNet's dict/ folder (default: $WNSEARCHDIR, else /usr/share/wordnet)",
    )


def add_parser(commands: Any) -> None:
    """Add ``wordnet-kg`` to the ``ptm`` sub-commands."""
    parser = commands.add_parser(
        KIND,
        help="write WordNet 3.0 as a KG folder (full, or WN18RR-style with a split)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("output", help="the KG folder to write (new, empty, or ptm's own)")
    add_wordnet_dir_argument(parser)
    parser.add_argument(
        "--pos",
        choices=sorted(_POS),
        default=None,
        help="parts of speech: n (default for full) or all (needed by wn18rr, its default)",
    )
    parser.add_argument("--style", choices=["full", "wn18rr"], default="full")
    parser.add_argument("--seed", type=int, default=None, help="wn18rr: the split's seed (0)")
    parser.add_argument(
        "--min-triples",
        type=int,
        default=None,
        help="wn18rr: keep synsets in at least this many WN18 triples (5)",
    )
    parser.add_argument(
        "--grouping",
        choices=["pair", "triple"],
        default=None,
        help="wn18rr: hold out all triples of an entity pair together (pair, default: no "
        "reverse leakage) or each triple alone (triple: as WN18RR, comparable with its figures)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT when it holds an earlier ptm wordnet-kg (never another folder)",
    )


def run(args: argparse.Namespace) -> int:
    """Run ``ptm wordnet-kg``; returns the exit code (1 with one ``ptm:`` line on bad input)."""
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

    given = [args.seed, args.min_triples, getattr(args, "grouping", None)]
    if args.style == "full" and any(value is not None for value in given):
        raise ValueError(
            "--seed, --min-triples and --grouping apply to --style wn18rr only; drop them"
        )
    pos = args.pos or ("all" if args.style == "wn18rr" else "n")
    if args.style == "wn18rr" and pos != "all":
        raise ValueError("--style wn18rr needs every part of speech: drop --pos n (or pass all)")
    output = Path(args.output)
    check = {"kind": KIND, "overwrite": args.overwrite, "option": "--overwrite"}
    check_output_directory(output, **check)  # before a minute of reading: refuse early
    wordnet = read_wordnet(wordnet_directory(args.wordnet_dir), pos=_POS[pos])
    lines = [f"wordnet    {wordnet.directory} ({pos}: {len(wordnet)} synsets)"]
    with atomic_directory(output, legacy=False, **check) as tmp:
        if args.style == "full":
            from ptm_knowledge.kg.wordnet import write_wordnet_kg

            kg = write_wordnet_kg(wordnet, tmp)
            top = ", ".join(f"{r} {n}" for r, n in list(kg.relations.items())[:4])
            lines += [f"entities   {kg.entities}", f"triples    {kg.triples} ({top}, ...)"]
            names = ["entities.tsv", "triples.tsv"]
        else:
            from ptm_knowledge.kg.wn18rr import WN18RR_PUBLISHED, write_wn18rr_style

            built = write_wn18rr_style(
                wordnet,
                tmp,
                seed=0 if args.seed is None else args.seed,
                min_triples=5 if args.min_triples is None else args.min_triples,
                grouping=args.grouping or "pair",
            )
            summary = built.summary()
            lines += [
                f"{key:<10} {summary[key]} (WN18RR: {WN18RR_PUBLISHED[key]})"
                for key in ("entities", "train", "valid", "test")
            ]
            split = built.split
            relations = {r for part in (split.train, split.valid, split.test) for _, r, _ in part}
            lines.append(f"relations  {len(relations)}")
            lines.append(f"grouping   {built.settings['grouping']}")
            names = ["entities.tsv", "triples.tsv (= train)", "train.tsv", "valid.tsv"]
            names += ["test.tsv", "wn18rr.json"]
    lines.append(f"written    {output}/: {', '.join(names)}")
    lines.append(f"load it    load_knowledge_graph({str(output)!r}) / ptm link --kg {output}")
    return lines
