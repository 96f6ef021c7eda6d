"""Markdown of :mod:`benchmarks.wordnet_linking`'s results."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _row(name: str, run: dict[str, Any]) -> str:
    t, timing, fw = run["test"], run["timing"], run["function_words_all_documents"]
    return (
        f"| {name} | {run['threshold']:.2f} | {fw['function_words']} | {t['recall']:.3f} | "
        f"{t['span_recall']:.3f} | {t['precision_partial']:.3f} | {t['precision_strict']:.3f} | "
        f"{t['predicted']} | {t['unjudged']} | {t['wrong_entity']} | {t['wrong_span']} | "
        f"{timing['documents_per_s']:.0f} | {timing['peak_rss_mb']} |"
    )


def write_markdown(result: dict[str, Any], path: Path) -> None:
    old, new, cal, hand = result["old"], result["new"], result["calibration"], result["hand_check"]
    inputs = result["inputs"]
    lines = [
        "# Entity linking on WordNet noun glosses: before and after #38",
        "",
        f"Command: `{result['command']}` (2 shared CPU cores; one process per linker).",
        "",
        f"KG: {inputs['synsets']} noun synsets ({inputs['kg_writer']}); gold: "
        f"{inputs['gold_mentions']} mentions in {inputs['gold_documents']} glosses "
        f"({inputs['gold']}), partial. Halves: {result['documents']['calibration']} "
        f"calibration / {result['documents']['test']} test glosses (seed 0). Figures on the "
        "test half except function words (all glosses).",
        "",
        "| linker | threshold | function-word mentions | recall (span+entity) | span recall "
        "| precision, partial | precision, strict | mentions | unjudged | wrong entity "
        "| wrong span | documents/s | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        _row("old (`LEGACY_SETTINGS`)", old),
        _row("new (defaults)", new),
        "",
        "*partial*: unjudged mentions (no gold span overlapped) left out of precision; "
        "*strict*: counted as spurious. Neither is the true precision: the gloss gold "
        "marks only the nouns whose synset the glossed synset points to. The hand check "
        "below measures the rest.",
        "",
        f"Recall change: {new['test']['recall'] - old['test']['recall']:+.3f} (span+entity), "
        f"{new['test']['span_recall'] - old['test']['span_recall']:+.3f} (span).",
        "",
        "## NIL threshold calibration (calibration half)",
        "",
        f"- strict F1-best threshold: **{cal['strict_threshold']:.2f}** (the default, "
        "`ptm_knowledge.linking.DEFAULT_THRESHOLD`)",
        f"- partial F1-best threshold: {cal['partial_threshold']:.2f}: with unjudged "
        "mentions left out, precision never pays for a low threshold, so partial gold "
        "calibrates towards linking everything the guard lets through; on the test half "
        f"it gives recall {result['new_at_partial_threshold']['recall']:.3f} with "
        f"{result['new_at_partial_threshold']['unjudged']} unjudged mentions.",
        "",
        "| threshold | recall | precision partial | precision strict | F1 partial | F1 strict |",
        "|---|---|---|---|---|---|",
    ]
    for row, partial in zip(cal["strict_table"], cal["partial_table"], strict=True):
        if round(row["threshold"] * 100) % 5 == 0:
            lines.append(
                f"| {row['threshold']:.2f} | {row['recall']:.3f} | "
                f"{partial['precision_partial']:.3f} | {row['precision_strict']:.3f} | "
                f"{partial['f1_partial']:.3f} | {row['f1_strict']:.3f} |"
            )
    fw_old, fw_new = old["function_words_all_documents"], new["function_words_all_documents"]
    lines += [
        "",
        "## Function words",
        "",
        f"- old: {fw_old['function_words']} ({', '.join(f'{w} {n}' for w, n in fw_old['top'])})",
        f"- new: {fw_new['function_words']}; capitalised names spelt like a stop word, "
        f"linked on purpose mid-sentence: {fw_new['capitalised_names']} "
        f"({', '.join(f'{w} {n}' for w, n in fw_new['names'])})",
        "",
        "## Hand check: 100 mentions of the new linker outside the gold",
        "",
        f"Seed {hand['seed']}, test half, threshold {new['threshold']:.2f}. Judged "
        f"{hand['judged']}; correct {hand['correct']}; **precision "
        f"{hand['precision'] if hand['precision'] is not None else 'n/a'}**.",
        "",
        *[
            f"Earlier check, {name}: {t['correct']} of {t['judged']} correct (its mentions "
            "and reasons are in `benchmarks/wordnet_linking_judgements.json`)."
            for name, t in hand.get("earlier_checks", {}).items()
        ],
        "",
        "| # | context | entity | ok | reason |",
        "|---|---|---|---|---|",
    ]
    for i, row in enumerate(hand["mentions"]):
        ok = {True: "yes", False: "no"}.get(row.get("correct"), "?")
        context = row["context"].replace("|", "/")
        entity = f"{row['entity']} {row['entity_name']}: {row['entity_description'][:60]}"
        lines.append(
            f"| {i} | {context} | {entity.replace('|', '/')} | {ok} | {row.get('reason', '')} |"
        )
    timing_old, timing_new = old["timing"], new["timing"]
    lines += [
        "",
        "## Speed and memory",
        "",
        "Linking only (KG load and linker build apart), all 82,115 glosses, runs alternated "
        "old/new on a shared 2-core machine; documents/s is the median run.",
        "",
        "| linker | KG load s | linker build s | link s | documents/s (median) | runs | "
        "peak RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, timing in (("old", timing_old), ("new", timing_new)):
        runs = ", ".join(f"{v:.0f}" for v in timing.get("documents_per_s_runs", []))
        lines.append(
            f"| {name} | {timing['kg_load_s']} | {timing['linker_build_s']} | "
            f"{timing['link_s']} | {timing['documents_per_s']:.0f} | {runs} | "
            f"{timing['peak_rss_mb']} |"
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
