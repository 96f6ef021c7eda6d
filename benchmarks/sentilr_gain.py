"""Does SentiLARE's label-aware pre-training help a sentiment task? SentiLR-tiny vs the same
BERT trained with plain MLM on the same texts, same steps, each fine-tuned on
``gain_sentiment`` (data_specs/gain_tasks: the polarity of nonce words seen only in
pre-training).

    python -m benchmarks.sentilr_gain --pretrain-steps 400 --seeds 0,1,2 --threads 1
    python -m benchmarks.sentilr_gain --pretrain-steps 1200 --seeds 0,1,2 --threads 1
    python -m benchmarks.sentilr_gain --pretrain-steps 50 --seeds 0 --reviews 300   # smoke

The labelled corpus is generated here from the gain suite's generator
(``data_specs/gain_tasks/make_corpus.py``: its lexicon, praising/complaining sentence
templates and neutral person/place/plain sentences): each review is labelled positive or
negative, and each of its 2-5 sentences is a polar sentence of the review's sign
(probability 0.85 of the polar ones; the rest have the other sign), or neutral narration
(one in three). Both arms read the same reviews with the suite's vocabulary (every nonce
word one token): the SentiLR arm as a labelled ``.jsonl``
(``experiment=sentilr_tiny``), the MLM arm as a text corpus, one review per document
(``experiment=bert_tiny_gain objective=mlm``: BERT's 15% and 80/10/10, no NSP). Same 2 x 128
BERT, batch 16, peak lr 1e-3, 128 tokens, seed 0. The SentiLR arm fine-tunes with its
POS/polarity inputs (family sentilr), the MLM arm as a core BERT; budgets and seeds are the
suite's (:data:`benchmarks.finetune_gain.GAIN_BUDGETS`). VADER rates none of the nonce
words, so their word polarity is neutral in both pre-training and fine-tuning: any gain comes
from the label-aware objective (the review label beside or predicted from the words), not
from the lexicon. Writes ``benchmarks/results/sentilr_gain.{md,json}`` (400 steps) or
``sentilr_gain_<steps>.{md,json}``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import platform
import random
import shlex
import sys
from pathlib import Path
from typing import Any

from benchmarks.finetune_gain import (
    GAIN_BUDGETS,
    GAIN_DIR,
    RESULTS,
    WORK,
    Runner,
    budget_overrides,
    budget_text,
    compare,
    gain_digest,
    mean_std,
    table,
)
from benchmarks.gain_pretraining import pretrain_on_gain_corpus

TASK = "gain_sentiment"
SENTILR = ["experiment=sentilr_tiny", "data.label_field=label", "data.batch_size=16"]
ARMS: dict[str, list[str]] = {
    "sentilr": SENTILR,
    "mlm alone": ["experiment=bert_tiny_gain", "objective=mlm", "data.batch_size=16"],
}
# --no-labels: SentiLR with the label input and the label target off (knowledge inputs,
# whole-word masking with 30% for sentiment words, POS/polarity targets kept).
NO_LABELS = {"sentilr, no labels": [*SENTILR, "objective.objectives.sentilr.use_labels=false"]}
POLAR_SHARE = 0.85  # polar sentences of the review's own sign


def _make_corpus_module() -> Any:
    spec = importlib.util.spec_from_file_location("gain_make_corpus", GAIN_DIR / "make_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_reviews(count: int, seed: int = 0) -> list[dict[str, str]]:
    """``count`` labelled reviews from the gain generator (see the module docstring)."""
    gen = _make_corpus_module()
    rng = random.Random(seed)
    lexicon = gen.build_lexicon()
    words = {kind: lexicon.all(kind) for kind in lexicon.words}
    neutral = [*gen.PERSON, *gen.PLACE, *gen.PLAIN]
    reviews = []
    for _ in range(count):
        label = rng.choice(("positive", "negative"))
        own, other = ("+", "-") if label == "positive" else ("-", "+")
        sentences = []
        for _ in range(rng.randint(2, 5)):
            if rng.random() < 1 / 3:
                sentences.append(gen.fill(rng.choice(neutral), rng, words))
            else:
                sign = own if rng.random() < POLAR_SHARE else other
                sentences.append(gen.polar_sentence(rng, words, sign))
        if not any(s for s in sentences):
            continue
        reviews.append({"text": " ".join(sentences), "label": label, "sentences": sentences})
    return reviews


def review_corpora(count: int) -> tuple[dict[str, tuple[Path, dict[str, Any]]], str]:
    """The reviews as ``reviews.jsonl`` (SentiLR) and ``reviews.txt`` (MLM), made once."""
    source = (Path(__file__).read_bytes(), (GAIN_DIR / "make_corpus.py").read_bytes())
    digest = hashlib.sha256(b"".join(source) + str(count).encode()).hexdigest()[:10]
    folder = WORK / f"sentilr-reviews-{count}-{digest}"
    jsonl, txt = folder / "reviews.jsonl", folder / "reviews.txt"
    reviews = make_reviews(count)
    if not (jsonl.is_file() and txt.is_file()):
        folder.mkdir(parents=True, exist_ok=True)
        jsonl.write_text(
            "".join(json.dumps({"text": r["text"], "label": r["label"]}) + "\n" for r in reviews)
        )
        txt.write_text("\n\n".join("\n".join(r["sentences"]) for r in reviews) + "\n")
    stats = {
        "reviews": len(reviews),
        "positive": sum(r["label"] == "positive" for r in reviews),
        "words": sum(len(r["text"].split()) for r in reviews),
        "bytes": jsonl.stat().st_size,
        "documents": len(reviews),
        "command": f"benchmarks/sentilr_gain.py make_reviews({count})",
    }
    return {
        "sentilr": (jsonl, {**stats, "path": str(jsonl)}),
        "mlm alone": (txt, {**stats, "path": str(txt)}),
    }, digest


def render(record: dict[str, Any]) -> str:
    pres = record["pretrain"]
    corpus = pres[0]["corpus"]
    row = record["rows"][0]
    gain = row.get("gain", {})
    lines = [
        "# SentiLR-tiny on gain_sentiment: label-aware MLM vs plain MLM",
        "",
        f"`{record['command']}` ({record['machine']}). Dev accuracy x 100, mean ± std over "
        f"fine-tuning seeds {record['seeds']} (one pre-training per arm, seed 0); *gain* is the "
        f"per-seed difference (SentiLR minus MLM alone). Both arms pre-train the same 2 x 128 "
        f"BERT for {pres[0]['steps']} steps (batch 16, peak lr 1e-3) on the same "
        f"{corpus['reviews']} generated reviews ({corpus['positive']} positive, "
        f"{corpus['words']} words; the gain suite's lexicon and templates, see "
        "`benchmarks/sentilr_gain.py`): SentiLR as labelled reviews with its POS/polarity "
        "inputs and label-aware MLM, the ablation as plain text with BERT's MLM. Fine-tuning "
        "budget and seeds are the same for both arms; the SentiLR arm fine-tunes with its "
        "knowledge inputs.",
        "",
        "Pre-training (first logged step -> last):",
        "",
    ]
    for pre in pres:
        first, last = pre["first_metrics"], pre["last_metrics"]
        keys = [k for k in ("loss", "sentilr/token_accuracy", "sentilr/label_accuracy",
                            "mlm/accuracy") if k in last]  # fmt: skip
        parts = ", ".join(f"{k} {first.get(k, float('nan')):.3f} -> {last[k]:.3f}" for k in keys)
        lines.append(f"- {pre['arm']}: `{' '.join(pre['arm_overrides'])}`, "
                     f"{pre['wall_s']:.0f} s; {parts}")  # fmt: skip
    lines += ["", table(record["rows"], lambda r: budget_text(r["budget"])), ""]
    if gain:
        verdict = (
            "SentiLR is ahead on every seed"
            if row["wins"] == len(record["seeds"])
            else f"SentiLR is ahead on {row['wins']} of {len(record['seeds'])} seeds"
        )
        lines += [
            f"{verdict} (gain {100 * gain['mean']:+.1f} ± {100 * gain['std']:.1f} points).",
            "",
        ]
    if "gain_no_labels" in row:
        other = row["gain_no_labels"]
        lines += [
            f"SentiLR without its label (`use_labels=false`) against MLM alone: "
            f"{100 * other['mean']:+.1f} ± {100 * other['std']:.1f} points, ahead on "
            f"{row['wins_no_labels']} of {len(record['seeds'])} seeds.",
            "",
        ]
    if record.get("note"):
        lines += [record["note"], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrain-steps", type=int, default=400)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--reviews", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--no-labels", action="store_true", help="add SentiLR without its label (an ablation)"
    )
    parser.add_argument("--note", default="", help="a paragraph written under the table")
    args = parser.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    corpora, digest = review_corpora(args.reviews)
    arms = {**ARMS, **(NO_LABELS if args.no_labels else {})}
    corpora.update({label: corpora["sentilr"] for label in NO_LABELS})
    finals: dict[str, Path] = {}
    pres = []
    for label, overrides in arms.items():
        slug = label.replace(" ", "_").replace(",", "")
        finals[label], pre = pretrain_on_gain_corpus(
            f"sentilr_gain-{slug}-{digest}",
            [*overrides, "seed=0", "trainer.log_every=50"],
            args.pretrain_steps,
            args.threads,
            extra={"arm": label, "seed": 0, "arm_overrides": overrides},
            corpus=corpora[label],
        )
        pres.append(pre)
    budget = dict(GAIN_BUDGETS[TASK])
    tag = f"sentilr_gain-{args.pretrain_steps}-{digest}-{gain_digest()}"
    row = compare(
        Runner(),
        seeds,
        TASK,
        {
            label: (
                f"{tag}/{label.replace(' ', '_').replace(',', '')}",
                [f"model={finals[label]}", *budget_overrides(budget)],
            )
            for label in arms
        },
    )
    row["budget"] = budget
    base = row["arms"]["mlm alone"]["values"]
    for label, key in (("sentilr", "gain"), ("sentilr, no labels", "gain_no_labels")):
        if label in row["arms"]:
            values = row["arms"][label]["values"]
            row[key] = mean_std([a - b for a, b in zip(values, base, strict=True)])
            row[key.replace("gain", "wins")] = sum(a > b for a, b in zip(values, base, strict=True))
    record = {
        "command": "python -m benchmarks.sentilr_gain "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, torch CPU, {args.threads or 'default'} thread(s)",
        "seeds": seeds,
        "pretrain": pres,
        "rows": [row],
        "note": args.note,
    }
    stem = "sentilr_gain" + ("" if args.pretrain_steps == 400 else f"_{args.pretrain_steps}")
    stem += "_no_labels" if args.no_labels else ""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / f"{stem}.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
