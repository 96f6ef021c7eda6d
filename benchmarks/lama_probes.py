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

    # K-BERT: a demo-sized BERT (``ptm pretrain experiment=bert_tiny``) read through sentence
    # trees with the sample KG's branches, against itself with injection off:
    nice -n 10 python -m benchmarks.lama_probes --label demo-kbert \
        --model runs/bert_tiny/final --kg data_specs/knowledge_graph/sample --kbert \
        --ablate-knowledge
    # the same on a generated KG (other names, other relations; see write_generated_kg):
    nice -n 10 python -m benchmarks.lama_probes --label generated-kg-kbert \
        --model runs/bert_tiny/final --generate-kg /tmp/generated_kg --kbert --ablate-knowledge

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


#: Relations of the generated KG; ``works_in`` repeats ``grew_up_in`` for half the people,
#: so a K-BERT branch can hold the answer through another fact.
GENERATED_RELATIONS = ("grew_up_in", "works_in", "owns")
FIRST_NAMES = ("Alder", "Brina", "Corvin", "Dessa", "Elmo", "Fenna", "Garret", "Hesper")
LAST_NAMES = ("Voss", "Kell", "Marrow", "Quill", "Tamsin")
PLACES = ("garden", "river", "forest", "village", "valley", "island", "camp")
THINGS = ("boat", "clock", "lamp", "book", "flag", "battery")


def write_generated_kg(directory: Path, vocabulary: set[str], seed: int = 0) -> Path:
    """A KG unlike the sample: 40 invented people, places and things from ``vocabulary``.

    ``grew_up_in`` and ``works_in`` (person -> place) agree for half the people; ``owns``
    (person -> thing) is random. Objects are words of the model's vocabulary.
    """
    import random

    rng = random.Random(seed)
    places = [w for w in PLACES if w in vocabulary]
    things = [w for w in THINGS if w in vocabulary]
    if len(places) < 3 or len(things) < 2:
        raise ValueError(f"too few of {PLACES + THINGS} in the model's vocabulary")
    people = [f"{a} {b}" for a in FIRST_NAMES for b in LAST_NAMES]
    directory.mkdir(parents=True, exist_ok=True)
    entities = ["id\tname\ttype\taliases\tdescription"]
    entities += [f"p{i}\t{name}\tperson\t\t" for i, name in enumerate(people)]
    entities += [f"{w}\t{w.capitalize()}\tplace\t\t" for w in places]
    entities += [f"{w}\t{w}\tthing\t\t" for w in things]
    triples = []
    for i in range(len(people)):
        home = rng.choice(places)
        work = home if rng.random() < 0.5 else rng.choice([p for p in places if p != home])
        triples += [(f"p{i}", "grew_up_in", home), (f"p{i}", "works_in", work)]
        triples.append((f"p{i}", "owns", rng.choice(things)))
    (directory / "entities.tsv").write_text("\n".join(entities) + "\n", encoding="utf-8")
    (directory / "triples.tsv").write_text(
        "".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8"
    )
    return directory


def run(args: argparse.Namespace) -> dict[str, Any]:
    from flows.analyze import lama
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    started = time.time()
    if args.generate_kg:
        vocabulary = set(load_task_tokenizer(args.model).backend.get_vocab())
        args.kg = str(write_generated_kg(Path(args.generate_kg), vocabulary))
    with tempfile.TemporaryDirectory() as tmp:
        result = lama(
            args.model,
            args.kg,
            Path(tmp) / "out",
            relations=args.relations.split(",") if args.relations else None,
            max_per_relation=args.max_per_relation,
            compare=args.compare,
            ablate_knowledge=args.ablate_knowledge,
            kbert=args.kbert,
            kbert_kg=args.kbert_kg,
        )
    tokenizer = load_task_tokenizer(args.model)  # the vocabulary only, not the weights again
    vocabulary = tokenizer.vocab_size - len(tokenizer.vocab_info.special_ids)
    shown = [a for a in args.argv if not a.startswith("--note=")]
    if "--note" in shown:  # the reading is printed under the command, not in it
        del shown[shown.index("--note") : shown.index("--note") + 2]
    command = "nice -n 10 python -m benchmarks.lama_probes " + " ".join(shown)
    return {
        "label": args.label,
        "command": command,
        "seconds": round(time.time() - started, 1),
        "chance_mrr": _chance_mrr(vocabulary),
        "note": args.note,
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
            *([section["note"], ""] if section.get("note") else []),
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
    parser.add_argument("--kg", default=None)
    parser.add_argument(
        "--generate-kg", default=None, help="write write_generated_kg's KG here and probe it"
    )
    parser.add_argument("--kbert", action="store_true", help="read --model as K-BERT")
    parser.add_argument("--kbert-kg", default=None, help="K-BERT's branch KG (default --kg)")
    parser.add_argument("--relations", default=None)
    parser.add_argument("--max-per-relation", type=int, default=None)
    parser.add_argument("--compare", default=None)
    parser.add_argument("--ablate-knowledge", action="store_true")
    parser.add_argument("--note", default="", help="a reading of the numbers, under the command")
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    if (args.kg is None) == (args.generate_kg is None):
        parser.error("give --kg KG or --generate-kg DIR")
    path = RESULTS / "lama_probes.json"
    sections = json.loads(path.read_text()) if path.is_file() else {}
    sections[args.label] = run(args)
    write(sections)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
