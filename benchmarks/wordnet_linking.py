"""Entity linking on WordNet noun glosses, before and after #38 (guard, context, NIL threshold).

    python -m benchmarks.wordnet_linking                  # WordNet at $WNSEARCHDIR or /usr/share/wordnet
    python -m benchmarks.wordnet_linking --print-sample   # the 100 mentions to hand-check

- **KG**: every noun synset of WordNet 3.0 (82,115), written in ptm's KG format (entity =
  synset, aliases = its lemmas, description = its definition, triples = its pointers).
- **Documents**: one per noun synset, its definition (gloss without the examples).
- **Gold** (partial): in synset S's definition, an occurrence of a lemma of a synset T that
  S points to is a mention of T. Partial: most nouns of a gloss are not gold, and a
  prediction that overlaps no gold span is *unjudged* (out of precision), not spurious.
- **Split**: the synsets are shuffled (seed 0) into two halves; the NIL threshold is
  calibrated on the first (*calibration*) and every figure is reported on the second
  (*test*).
- **Linkers**: ``old`` = :data:`~ptm_knowledge.linking.LEGACY_SETTINGS` (the linker before
  #38), ``new`` = the defaults, linked once with ``threshold=0`` so that every threshold
  can be evaluated from the scores. Each runs in its own process: documents/s over the
  linking (the KG load and the linker build are timed apart) and the peak RSS (VmHWM).
- **Calibration**: span+entity F1 over thresholds 0.00-0.60 (step 0.01) on the
  calibration half, (a) *partial* (unjudged left out: blind to spurious links, so the
  lowest threshold wins) and (b) *strict* (unjudged counted as spurious: pessimistic, as
  many unjudged links are right). The strict optimum is the default NIL threshold.
- **Hand check**: 100 mentions of the new linker at the calibrated threshold, drawn
  (seed 38) from the test half among those that overlap no gold span, each judged by hand
  (``benchmarks/wordnet_linking_judgements.json``: correct or not, one-line reason).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT

RESULTS = Path(__file__).resolve().parent / "results"
JUDGEMENTS = Path(__file__).resolve().parent / "wordnet_linking_judgements.json"
WORK = BENCH_DIR / "wordnet_linking"
THRESHOLDS = [round(0.01 * i, 2) for i in range(61)]
SAMPLE_SIZE = 100
SAMPLE_SEED = 38
COMMAND = "nice -n 10 .venv/bin/python -m benchmarks.wordnet_linking"


def build_inputs(wordnet_dir: str | None) -> tuple[Path, Path, dict[str, Any]]:
    """The noun KG and the gloss gold under ``WORK`` (built once)."""
    from benchmarks.wordnet_inputs import write_gloss_gold, write_noun_kg

    kg_dir, gold = WORK / "kg", WORK / "gold.jsonl"
    info_path = WORK / "inputs.json"
    if not info_path.is_file():
        from ptm_knowledge.kg.wordnet import read_wordnet

        wordnet = read_wordnet(wordnet_dir)
        info = {"synsets": len(wordnet), **write_noun_kg(wordnet, kg_dir)}
        info.update(write_gloss_gold(wordnet, gold))
        info_path.write_text(json.dumps(info), encoding="utf-8")
    return kg_dir, gold, json.loads(info_path.read_text(encoding="utf-8"))


def link_child(kg_dir: str, gold: str, settings: dict[str, Any], out: str) -> None:
    """In a fresh process: load the KG, build the linker, link every gloss, write
    predictions and timings."""
    from benchmarks.peak_rss import status_kb
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    start = time.perf_counter()
    kg = load_knowledge_graph(kg_dir, cache_dir=WORK / "kg-cache")
    loaded = time.perf_counter()
    linker = EntityLinker(kg, **settings)
    built = time.perf_counter()
    docs = [json.loads(line) for line in Path(gold).read_text(encoding="utf-8").splitlines()]
    texts = (d["text"] for d in docs)
    with Path(out).open("w", encoding="utf-8") as handle:
        for doc, mentions in zip(docs, linker.link_batch(texts), strict=True):
            rows = [[m.start, m.end, m.entity_id, round(m.score, 4), m.text] for m in mentions]
            handle.write(json.dumps({"id": doc["id"], "mentions": rows}) + "\n")
    done = time.perf_counter()
    timing = {
        "kg_load_s": round(loaded - start, 1),
        "linker_build_s": round(built - loaded, 1),
        "link_s": round(done - built, 1),
        "documents": len(docs),
        "documents_per_s": round(len(docs) / (done - built), 1),
        "peak_rss_mb": round(status_kb("VmHWM") / 1024),
    }
    Path(out + ".timing.json").write_text(json.dumps(timing), encoding="utf-8")


def run_linker(name: str, kg_dir: Path, gold: Path, settings: dict[str, Any]) -> dict[str, Any]:
    out = WORK / f"predictions-{name}.jsonl"
    code = (
        "import json, sys; from benchmarks.wordnet_linking import link_child; "
        "link_child(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(kg_dir), str(gold), json.dumps(settings), str(out)],
        check=True,
        cwd=ROOT,
    )
    timing = json.loads(Path(str(out) + ".timing.json").read_text(encoding="utf-8"))
    predictions = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        predictions[row["id"]] = [tuple(m) for m in row["mentions"]]
    return {"settings": settings, "timing": timing, "predictions": predictions}


def evaluate(docs: list[dict[str, Any]], predictions: dict[str, list], threshold: float) -> dict:
    """Span and span+entity recall, partial and strict precision, F1, error counts."""
    gold_total = tp = span_hits = judged = wrong_entity = wrong_span = predicted = 0
    for doc in docs:
        gold = {(m["start"], m["end"]): m["entity"] for m in doc["mentions"]}
        gold_total += len(gold)
        for start, end, entity, score, _ in predictions.get(doc["id"], []):
            if score < threshold:
                continue
            predicted += 1
            if (start, end) in gold:
                judged += 1
                span_hits += 1
                if gold[(start, end)] == entity:
                    tp += 1
                else:
                    wrong_entity += 1
            elif any(s < end and start < e for s, e in gold):
                judged += 1
                wrong_span += 1
    p_partial = tp / judged if judged else 0.0
    p_strict = tp / predicted if predicted else 0.0
    recall = tp / gold_total if gold_total else 0.0

    def f1(p: float) -> float:
        return 2 * p * recall / (p + recall) if p + recall else 0.0

    return {
        "threshold": threshold,
        "gold": gold_total,
        "predicted": predicted,
        "unjudged": predicted - judged,
        "wrong_entity": wrong_entity,
        "wrong_span": wrong_span,
        "span_recall": round(span_hits / gold_total, 4) if gold_total else 0.0,
        "recall": round(recall, 4),
        "precision_partial": round(p_partial, 4),
        "precision_strict": round(p_strict, 4),
        "f1_partial": round(f1(p_partial), 4),
        "f1_strict": round(f1(p_strict), 4),
    }


def calibrate(docs: list[dict], predictions: dict[str, list], key: str) -> tuple[float, list]:
    """The F1-best threshold (``key``: ``f1_partial`` or ``f1_strict``), the lowest on ties."""
    table = [evaluate(docs, predictions, t) for t in THRESHOLDS]
    best = max(table, key=lambda row: (row[key], -row["threshold"]))
    return best["threshold"], table


def function_word_mentions(
    docs: list[dict], predictions: dict[str, list], threshold: float
) -> dict[str, Any]:
    """Mentions that are function words (lower-case spaCy stop words, numbers,
    punctuation), and, apart, capitalised names spelt like one ("US", "AM")."""
    import spacy

    nlp = spacy.blank("en")
    function: Counter[str] = Counter()
    names: Counter[str] = Counter()
    for doc in docs:
        for _, _, _, score, text in predictions.get(doc["id"], []):
            if score < threshold:
                continue
            tokens = nlp.make_doc(text)
            if all(t.is_stop or t.like_num or t.is_punct for t in tokens):
                (names if text[:1].isupper() else function)[text] += 1
    return {
        "function_words": sum(function.values()),
        "top": function.most_common(10),
        "capitalised_names": sum(names.values()),
        "names": names.most_common(10),
    }


def hand_sample(docs: list[dict], predictions: dict[str, list], threshold: float) -> list[dict]:
    """``SAMPLE_SIZE`` mentions at ``threshold`` that overlap no gold span (seeded)."""
    pool = []
    for doc in docs:
        spans = [(m["start"], m["end"]) for m in doc["mentions"]]
        for start, end, entity, score, text in predictions.get(doc["id"], []):
            if score >= threshold and not any(s < end and start < e for s, e in spans):
                pool.append((doc["id"], start, end, entity, score, text))
    pool.sort()
    picked = random.Random(SAMPLE_SEED).sample(pool, SAMPLE_SIZE)
    return [
        dict(zip(("doc", "start", "end", "entity", "score", "text"), row, strict=True))
        for row in picked
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet-dir", default=None)
    parser.add_argument("--print-sample", action="store_true", help="list the hand-check sample")
    parser.add_argument("--repeat", type=int, default=3, help="runs per linker (median speed)")
    args = parser.parse_args(argv)
    from ptm_knowledge.linking import LEGACY_SETTINGS

    WORK.mkdir(parents=True, exist_ok=True)
    kg_dir, gold_path, inputs = build_inputs(args.wordnet_dir)
    docs = [json.loads(line) for line in gold_path.read_text(encoding="utf-8").splitlines()]
    order = list(range(len(docs)))
    random.Random(0).shuffle(order)
    half = set(order[: len(order) // 2])
    calibration = [d for i, d in enumerate(docs) if i in half]
    test = [d for i, d in enumerate(docs) if i not in half]

    old = run_linker("old", kg_dir, gold_path, dict(LEGACY_SETTINGS))
    new = run_linker("new", kg_dir, gold_path, {"threshold": 0.0})
    # The machine is shared: more runs, alternated, and the median documents/s of each.
    for _ in range(args.repeat - 1):
        for run, settings in ((old, dict(LEGACY_SETTINGS)), (new, {"threshold": 0.0})):
            name = "old" if run is old else "new"
            run.setdefault("runs", [run["timing"]])
            run["runs"].append(run_linker(name, kg_dir, gold_path, settings)["timing"])
    for run in (old, new):
        runs = run.setdefault("runs", [run["timing"]])
        speeds = [r["documents_per_s"] for r in runs]
        run["timing"] = {
            **run["timing"],
            "documents_per_s": round(statistics.median(speeds), 1),
            "documents_per_s_runs": [r["documents_per_s"] for r in runs],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        }
    strict_t, strict_table = calibrate(calibration, new["predictions"], "f1_strict")
    partial_t, partial_table = calibrate(calibration, new["predictions"], "f1_partial")
    sample = hand_sample(test, new["predictions"], strict_t)
    entities = _entity_table(kg_dir)
    texts = {d["id"]: d["text"] for d in docs}
    for row in sample:
        row["context"] = _context(texts[row["doc"]], row["start"], row["end"])
        row["entity_name"], row["entity_description"] = entities[row["entity"]]
    if args.print_sample:
        for i, row in enumerate(sample):
            print(i, row["context"], "->", row["entity_name"], "|", row["entity_description"])
        return 0
    judged = _judgements(sample)
    result = {
        "command": f"{COMMAND}{' --wordnet-dir ' + args.wordnet_dir if args.wordnet_dir else ''}"
        + (f" --repeat {args.repeat}" if args.repeat != 3 else ""),
        "inputs": inputs,
        "documents": {"calibration": len(calibration), "test": len(test)},
        "calibration": {
            "strict_threshold": strict_t,
            "partial_threshold": partial_t,
            "strict_table": strict_table,
            "partial_table": partial_table,
        },
        "old": _report(old, test, LEGACY_SETTINGS["threshold"]),
        "new": _report(new, test, strict_t),
        "new_at_partial_threshold": evaluate(test, new["predictions"], partial_t),
        "hand_check": judged,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "wordnet_linking.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    from benchmarks.wordnet_linking_report import write_markdown

    write_markdown(result, RESULTS / "wordnet_linking.md")
    print((RESULTS / "wordnet_linking.md").read_text(encoding="utf-8"))
    return 0


def _report(run: dict[str, Any], test: list[dict], threshold: float) -> dict[str, Any]:
    return {
        "settings": run["settings"],
        "threshold": threshold,
        "timing": run["timing"],
        "test": evaluate(test, run["predictions"], threshold),
        "function_words_all_documents": function_word_mentions(
            [{"id": i} for i in run["predictions"]], run["predictions"], threshold
        ),
    }


def _entity_table(kg_dir: Path) -> dict[str, tuple[str, str]]:
    from ptm_knowledge.kg.graph import read_entity_table

    return {e.id: (e.name, e.description) for e in read_entity_table(kg_dir / "entities.tsv")}


def _context(text: str, start: int, end: int, width: int = 45) -> str:
    left = ("..." if start > width else "") + text[max(0, start - width) : start]
    right = text[end : end + width] + ("..." if end + width < len(text) else "")
    return f"{left}[{text[start:end]}]{right}"


def _judgements(sample: list[dict]) -> dict[str, Any]:
    """The sample with its hand judgements (``JUDGEMENTS``), and the precision."""
    known = {}
    if JUDGEMENTS.is_file():
        for row in json.loads(JUDGEMENTS.read_text(encoding="utf-8")):
            known[(row["doc"], row["start"], row["end"], row["entity"])] = row
    rows, correct, judged = [], 0, 0
    for row in sample:
        verdict = known.get((row["doc"], row["start"], row["end"], row["entity"]))
        row = dict(row)
        if verdict is not None:
            row["correct"], row["reason"] = verdict["correct"], verdict["reason"]
            judged += 1
            correct += bool(verdict["correct"])
        rows.append(row)
    # every sample judged so far, by its label (an earlier linker drew other mentions)
    in_sample = {(r["doc"], r["start"], r["end"], r["entity"]) for r in sample}
    earlier: dict[str, list[int]] = {}
    for row in known.values():
        tally = earlier.setdefault(row.get("check", "earlier"), [0, 0])
        tally[0] += bool(row["correct"])
        tally[1] += 1
    labels = {known[k].get("check", "earlier") for k in in_sample if k in known}
    earlier = {k: v for k, v in earlier.items() if v[1] >= SAMPLE_SIZE or k not in labels}
    return {
        "seed": SAMPLE_SEED,
        "earlier_checks": {k: {"correct": c, "judged": n} for k, (c, n) in earlier.items()},
        "judged": judged,
        "correct": correct,
        "precision": round(correct / judged, 3) if judged else None,
        "mentions": rows,
    }


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
