"""``ptm evaluate-linking``: a linker's mentions against gold mentions.

ptm evaluate-linking --gold gold.jsonl --predictions linked.jsonl   # score `ptm link` output
ptm evaluate-linking --gold gold.jsonl --kg kg/ --calibrate         # link, score, calibrate NIL
ptm evaluate-linking --gold gold.jsonl --kg kg/ --legacy-linker     # the linker before #38

Gold and predictions are linked corpora (data_specs/linked_corpus), matched by document id;
``"complete": false`` marks a partial gold (docs/knowledge/evaluate-linking.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from flows.linker_flags import add_linker_arguments, linker_options
from ptm_core.atomic import DiskFullError

KIND = "evaluate-linking"


def add_parser(commands: Any) -> None:
    """Add ``evaluate-linking`` to the ``ptm`` sub-commands."""
    parser = commands.add_parser(
        KIND,
        help="precision, recall and F1 of entity links against gold mentions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--gold", required=True, help="gold mentions (linked-corpus .jsonl)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--predictions", help="linked corpus to score (e.g. `ptm link` output)")
    source.add_argument("--kg", help="a KG folder: link the gold's sentences with ptm's linker")
    parser.add_argument("--report", default=None, help="write the report JSON here")
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="also sweep the NIL threshold on this gold and print the F1-best one",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="calibrate counting unjudged links (partial gold) as wrong",
    )
    add_linker_arguments(parser)


def _predictions(
    args: argparse.Namespace, gold_path: str
) -> tuple[list[Any], list[Any], float | None]:
    from ptm_knowledge.linking import EntityLinker, read_linked_corpus
    from ptm_knowledge.linking.evaluation import link_gold_documents

    if args.predictions is not None:
        gold = read_linked_corpus(gold_path)
        predicted = read_linked_corpus(args.predictions)
        return predicted, gold, args.threshold
    from ptm_knowledge.kg import load_knowledge_graph

    kg = load_knowledge_graph(args.kg)
    gold = read_linked_corpus(gold_path, kg.entity_ids)
    options = linker_options(args)
    # Link with threshold 0 so every candidate link has a score: the report applies the
    # threshold afterwards, and --calibrate sweeps it.
    linker = EntityLinker(kg, **{**options, "threshold": 0.0})
    print(f"ptm evaluate-linking: linking {len(gold)} gold documents against {args.kg}")
    return link_gold_documents(linker, gold), gold, float(options["threshold"])


def _table(report: Any) -> list[str]:
    lines = [f"{'level':<16} {'precision':>9} {'recall':>7} {'F1':>7}"]
    for name, level in (("span", "span"), ("span + entity", "entity")):
        s = report.scores(level)
        lines.append(f"{name:<16} {s['precision']:>9.3f} {s['recall']:>7.3f} {s['f1']:>7.3f}")
    errors = report.to_dict()["errors"]
    lines.append(
        f"gold {report.gold}, linked {report.linked} (judged {report.judged}); "
        + ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in errors.items())
    )
    return lines


def run(args: argparse.Namespace) -> int:
    """Run ``ptm evaluate-linking``; returns the exit code (1 with one line on bad input)."""
    from ptm_core.atomic import atomic_write_text
    from ptm_knowledge.kg.graph import KGError
    from ptm_knowledge.linking.evaluation import calibrate_nil_threshold, evaluate_linking

    try:
        predicted, gold, threshold = _predictions(args, args.gold)
        report = evaluate_linking(predicted, gold, threshold=threshold)
        result = report.to_dict()
        lines = _table(report)
        if threshold is not None:
            lines.insert(0, f"NIL threshold {threshold:g}")
        if args.calibrate:
            best, table = calibrate_nil_threshold(predicted, gold, strict=args.strict)
            row = next(r for r in table if r["threshold"] == best)
            result["calibration"] = {"strict": args.strict, "threshold": best, "sweep": table}
            how = "unjudged counted as wrong" if args.strict else "unjudged left out"
            lines.append(
                f"calibrated NIL threshold {best:g} ({how}): span + entity P {row['precision']:.3f}"
                f" R {row['recall']:.3f} F1 {row['f1']:.3f}; use it with `ptm link --threshold {best:g}`"
            )
        if args.report:
            atomic_write_text(args.report, json.dumps(result, indent=2) + "\n")
            lines.append(f"report     {args.report}")
    except (ValueError, FileNotFoundError, KGError, DiskFullError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0
