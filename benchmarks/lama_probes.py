"""LAMA probes of ptm's knowledge models (``ptm analyze MODEL lama``), per relation.

    # the demo's ERNIE-THU (``make demo`` writes runs/demo/pretrain/final) on the sample KG,
    # with and without its entity inputs:
    nice -n 10 python -m benchmarks.lama_probes --label demo-ernie-thu \
        --model runs/demo/pretrain/final --kg data_specs/knowledge_graph/sample --ablate-knowledge
    # WordNet hypernyms ("A dog is a kind of [MASK] .") on the ERNIE-THU that
    # benchmarks.wordnet_knowledge_gain pre-trains (after-transe setting):
    nice -n 10 python -m benchmarks.lama_probes --label wordnet-hypernyms \
        --model $PTM_BENCH_DIR/wordnet-knowledge-gain/pretrain-after-300/final \
        --kg $PTM_BENCH_DIR/wordnet-knowledge-gain/kg --relations _hypernym --ablate-knowledge

Each run replaces its label's section of ``benchmarks/results/lama_probes.{md,json}`` and
keeps the others. ``chance`` is the MRR of a uniform ranking over the model's vocabulary
(minus special tokens), the floor every row must be read against.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def _chance_mrr(vocabulary: int) -> float:
    return sum(1.0 / r for r in range(1, vocabulary + 1)) / vocabulary


def run(args: argparse.Namespace) -> dict[str, Any]:
    from flows.analyze import lama
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        result = lama(
            args.model,
            args.kg,
            Path(tmp) / "out",
            relations=args.relations.split(",") if args.relations else None,
            max_per_relation=args.max_per_relation,
            compare=args.compare,
            ablate_knowledge=args.ablate_knowledge,
        )
    tokenizer = load_task_tokenizer(args.model)  # the vocabulary only, not the weights again
    vocabulary = tokenizer.vocab_size - len(tokenizer.vocab_info.special_ids)
    command = "nice -n 10 python -m benchmarks.lama_probes " + " ".join(args.argv)
    return {
        "label": args.label,
        "command": command,
        "seconds": round(time.time() - started, 1),
        "chance_mrr": _chance_mrr(vocabulary),
        "markdown": result["markdown"].split("\n## Examples")[0],
        "summary": result["summary"],
        "comparison": result["comparison"],
    }


def write(sections: dict[str, Any]) -> None:
    lines = [
        "# LAMA probes",
        "",
        "Produced by `benchmarks/lama_probes.py` (`ptm analyze MODEL lama`); the command of",
        "each section is under its heading. See docs/knowledge/lama.md for the scoring rule.",
        "",
    ]
    for label, section in sections.items():
        body = (
            section["markdown"].split("\n", 2)[2]
            if section["markdown"].startswith("# ")
            else section["markdown"]
        )
        lines += [
            f"## {label}",
            "",
            f"`{section['command']}` ({section['seconds']:.0f} s on 2 shared CPU cores). "
            f"Chance MRR (uniform over the vocabulary): {section['chance_mrr']:.4f}.",
            "",
            body.replace("\n## ", "\n### "),
            "",
        ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "lama_probes.md").write_text("\n".join(lines))
    (RESULTS / "lama_probes.json").write_text(json.dumps(sections, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--kg", required=True)
    parser.add_argument("--relations", default=None)
    parser.add_argument("--max-per-relation", type=int, default=None)
    parser.add_argument("--compare", default=None)
    parser.add_argument("--ablate-knowledge", action="store_true")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    path = RESULTS / "lama_probes.json"
    sections = json.loads(path.read_text()) if path.is_file() else {}
    sections[args.label] = run(args)
    write(sections)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
