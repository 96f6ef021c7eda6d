"""``ptm analyze MODEL PROBE``: look inside a trained model.

ptm analyze runs/demo/pretrain/final lama --kg kg/ --output analysis/lama
ptm analyze runs/ernie/final lama --kg kg/ --compare runs/no-kg/final --output analysis/vs
ptm analyze hf_bert/ lama --kg wordnet/ --relations _hypernym --max-per-relation 500 \\
    --templates my_templates.yaml --output analysis/wordnet

``lama``: cloze statements from a KG's triples, one template per relation (built in for the
sample KG and WordNet, derived from the relation's name otherwise, or from --templates),
scored by the model's masked-LM head: P@1, P@10 and MRR per relation and overall, in
lama.md, lama.json and lama_relations.png under --output. See docs/guides/analysis.md.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

KIND = "analyze"


def add_parser(commands: Any) -> None:
    """Add ``analyze`` to the ``ptm`` sub-commands."""
    analyze = commands.add_parser(
        KIND,
        help="probe what a model holds (LAMA knowledge probes)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    analyze.add_argument("model", help="a folder with a masked-LM head (ptm final/ or HF)")
    probes = analyze.add_subparsers(dest="probe", required=True, metavar="PROBE")
    lama = probes.add_parser("lama", help="LAMA cloze statements from a KG's triples")
    lama.add_argument("--kg", required=True, help="KG folder (entities.tsv, triples.tsv)")
    lama.add_argument("--output", required=True, help="folder for lama.md/json/png")
    lama.add_argument("--templates", default=None, help='YAML: relation: "[X] ... [Y] ."')
    lama.add_argument("--relations", default=None, help="comma-separated relations (default: all)")
    lama.add_argument(
        "--max-per-relation", type=int, default=None, help="a seeded sample of N facts each"
    )
    lama.add_argument("--compare", default=None, help="a second model, on the same facts")
    lama.add_argument(
        "--seen-triples",
        default=None,
        help="a triples file (a KG-embedding train.tsv): scores split into seen/held-out",
    )
    lama.add_argument(
        "--holdout-kg",
        default=None,
        help="also write the KG here with the probed facts in test.tsv only (for embed-kg)",
    )
    lama.add_argument(
        "--no-knowledge",
        action="store_true",
        help="probe ERNIE-THU folders through their text encoder alone (no entity inputs)",
    )
    lama.add_argument(
        "--ablate-knowledge",
        action="store_true",
        help="compare an ERNIE-THU folder against itself without entity inputs",
    )
    lama.add_argument("--seed", type=int, default=0)
    lama.add_argument("--batch-size", type=int, default=64)
    lama.add_argument(
        "--overwrite", action="store_true", help="replace an earlier ptm analysis at --output"
    )


def run(args: argparse.Namespace) -> int:
    """Run the probe; print its table; 1 with one ``ptm:`` line on bad input."""
    from flows.analyze import lama

    if args.max_per_relation is not None and args.max_per_relation < 1:
        print(
            f"ptm: --max-per-relation is {args.max_per_relation}; give 1 or more", file=sys.stderr
        )
        return 2
    relations = None if args.relations is None else [r for r in args.relations.split(",") if r]
    try:
        result = lama(
            args.model,
            args.kg,
            args.output,
            templates=args.templates,
            relations=relations,
            max_per_relation=args.max_per_relation,
            seed=args.seed,
            compare=args.compare,
            seen_triples=args.seen_triples,
            batch_size=args.batch_size,
            holdout_kg=args.holdout_kg,
            knowledge=not args.no_knowledge,
            ablate_knowledge=args.ablate_knowledge,
            overwrite=args.overwrite,
        )
    except (OSError, ValueError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    text = result["markdown"].split("\n## Examples")[0]
    print(text.split("\n", 2)[2] if text.startswith("# ") else text)
    print(f"report: {result['output']}/lama.md")
    if result["holdout_kg"]:
        held = result["holdout_kg"]
        print(
            f"KG with the {held['probe']} probed facts held out of training: {held['folder']} "
            f"(train {held['train']}, valid {held['valid']}, test {held['test']} triples); "
            f"embed it with `ptm embed-kg --kg {held['folder']}`"
        )
    return 0
