"""``ptm analyze MODEL PROBE``: look inside a trained model.

ptm analyze runs/demo/pretrain/final lama --kg kg/ --output analysis/lama
ptm analyze runs/ernie/final lama --kg kg/ --compare runs/no-kg/final --output analysis/vs
ptm analyze runs/bert/final lama --kg kg/ --kbert --ablate-knowledge --output analysis/kbert
ptm analyze runs/demo/pretrain/final minimal-pairs --pairs data_specs/minimal_pairs/sample.tsv
ptm analyze hf_bert/ lama --kg wordnet/ --relations _hypernym --max-per-relation 500 \\
    --templates my_templates.yaml --output analysis/wordnet

``minimal-pairs``: the share of pairs (good<TAB>bad sentences) whose good sentence has the
higher pseudo-log-likelihood (Salazar et al., 2020); ``pll``: the PLL of each sentence.

``lama``: cloze statements from a KG's triples, one template per relation (built in for the
sample KG and WordNet, derived from the relation's name otherwise, or from --templates),
scored by the model's masked-LM head: P@1, P@10 and MRR per relation and overall, in
lama.md, lama.json and lama_relations.png under --output. See docs/guides/analysis.md and docs/knowledge/lama.md.

``layers``: linear probes per layer with control tasks (docs/guides/layer_probes.md);
``representations``, ``attention``, ``heads``: anisotropy, CKA, attention entropy and mass,
head importance vs ablation (docs/guides/representations.md); ``attack``: a word-substitution
attack on a fine-tuned classifier (docs/guides/robustness.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from flows import cli_analyze_attack, cli_analyze_layers, cli_analyze_repr

KIND = "analyze"


def add_parser(commands: Any) -> None:
    """Add ``analyze`` to the ``ptm`` sub-commands."""
    analyze = commands.add_parser(
        KIND,
        help="look inside a model: LAMA, layer probes, representations, attention, attacks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    analyze.add_argument(
        "model",
        help="a model folder, ptm final/ or HF (lama, minimal-pairs, pll: with an MLM head; "
        "attack, heads: a fine-tuned classifier)",
    )
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
        help="compare an ERNIE-THU folder against itself without entity inputs, or with "
        "--kbert the sentence trees against themselves without branches",
    )
    lama.add_argument(
        "--kbert",
        action="store_true",
        help="read MODEL as K-BERT: each statement through a sentence tree with KG branches "
        "(the probed triple left out)",
    )
    lama.add_argument(
        "--kbert-kg", default=None, help="the KG K-BERT's branches come from (default: --kg)"
    )
    lama.add_argument("--max-entities", type=int, default=2, help="K-BERT branches per subject")
    lama.add_argument("--seed", type=int, default=0)
    lama.add_argument("--batch-size", type=int, default=64)
    lama.add_argument(
        "--overwrite", action="store_true", help="replace an earlier ptm analysis at --output"
    )
    pairs = probes.add_parser(
        "minimal-pairs", help="pseudo-log-likelihood accuracy on good/bad sentence pairs"
    )
    pairs.add_argument(
        "--pairs",
        default="data_specs/minimal_pairs/sample.tsv",
        help="TSV good<TAB>bad[<TAB>phenomenon] (default: the generated sample)",
    )
    pairs.add_argument("--output", default=None, help="also write the scores as JSON here")
    pairs.add_argument("--batch-size", type=int, default=64)
    pll = probes.add_parser("pll", help="pseudo-log-likelihood of each line of a text file")
    pll.add_argument("--sentences", required=True, help="a text file, one sentence per line")
    pll.add_argument("--batch-size", type=int, default=64)
    cli_analyze_attack.add_probe_parser(probes)
    cli_analyze_layers.add_probe_parser(probes)
    cli_analyze_repr.add_probe_parser(probes)


def run(args: argparse.Namespace) -> int:
    """Run the probe; print its table; 1 with one ``ptm:`` line on bad input."""
    if args.probe == "attack":
        return cli_analyze_attack.run_probe(args)
    if args.probe == cli_analyze_layers.NAME:
        return cli_analyze_layers.run_probe(args)
    if args.probe in cli_analyze_repr.PROBES:
        return cli_analyze_repr.run_probe(args)
    try:
        if args.probe == "minimal-pairs":
            return _minimal_pairs(args)
        if args.probe == "pll":
            return _pll(args)
    except (OSError, ValueError) as exc:
        print(f"ptm: {exc}", file=sys.stderr)
        return 1
    return _lama(args)


def _minimal_pairs(args: argparse.Namespace) -> int:
    import json

    from ptm_core.analysis import load_masked_language_model
    from ptm_core.analysis.pll import minimal_pair_accuracy, read_minimal_pairs
    from ptm_core.atomic import atomic_write_text

    pairs = read_minimal_pairs(args.pairs)
    result = minimal_pair_accuracy(
        load_masked_language_model(args.model), pairs, batch_size=args.batch_size
    )
    print("| phenomenon | pairs | accuracy |\n|---|---|---|")
    for name, row in result["phenomena"].items():  # type: ignore[attr-defined]
        print(f"| {name} | {row['pairs']} | {row['accuracy']:.3f} |")
    print(f"| **all** | {result['pairs']} | {result['accuracy']:.3f} |")
    print("(a pair is right when the good sentence has the higher pseudo-log-likelihood)")
    if args.output:
        record = {"model": args.model, "pairs_file": args.pairs, **result}
        record["scores"] = [
            {"good": p.good, "bad": p.bad, "phenomenon": p.phenomenon, "good_pll": g, "bad_pll": b}
            for p, (g, b) in zip(pairs, result["scores"], strict=True)  # type: ignore[call-overload]
        ]
        atomic_write_text(args.output, json.dumps(record, indent=2) + "\n")
        print(f"scores: {args.output}")
    return 0


def _pll(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ptm_core.analysis import load_masked_language_model
    from ptm_core.analysis.pll import pseudo_log_likelihoods

    lines = [line.strip() for line in Path(args.sentences).read_text(encoding="utf-8").splitlines()]
    sentences = [line for line in lines if line]
    if not sentences:
        raise ValueError(f"{args.sentences}: no sentence (one per line)")
    model = load_masked_language_model(args.model)
    for sentence, score in zip(
        sentences, pseudo_log_likelihoods(model, sentences, batch_size=args.batch_size), strict=True
    ):
        print(f"{score:.4f}\t{sentence}")
    return 0


def _lama(args: argparse.Namespace) -> int:
    from flows.analyze import lama

    if args.max_per_relation is not None and args.max_per_relation < 1:
        print(
            f"ptm: --max-per-relation is {args.max_per_relation}; give 1 or more", file=sys.stderr
        )
        return 2
    if args.kbert_kg and not args.kbert:
        print("ptm: --kbert-kg names K-BERT's branch KG; add --kbert", file=sys.stderr)
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
            kbert=args.kbert,
            kbert_kg=args.kbert_kg,
            max_entities=args.max_entities,
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
