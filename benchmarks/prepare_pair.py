"""Preparation throughput: ``ptm prepare`` vs Hugging Face ``datasets.map(batched=True)``.

    python -m benchmarks.prepare_pair                    # 100 MB corpus, 2 processes, 3 rounds
    python -m benchmarks.prepare_pair --size 10MB --repeat 1

Same generated corpus file, same WordPiece ``tokenizer.json`` (trained once on the corpus
by :func:`benchmarks.fixtures.ensure_tokenizer`), same number of processes
(``workers=N`` for ptm, ``num_proc=N`` for ``datasets``), ``TOKENIZERS_PARALLELISM=false``
on both sides. Each preparation runs in a fresh process into an empty output folder (ptm
would otherwise find its output up to date and do nothing; the ``datasets`` caches are
removed first); the two sides alternate, who goes first swapping every round, and the
ratio is the median of the per-round ratios.

What each side includes:

- **ptm** (:func:`ptm_core.data.prepare.prepare_corpus`): reading the file, sentence
  splitting (``.txt``: a sentence per line; ``.jsonl``: ``split_sentences``), line
  validation, tokenization in worker processes, writing uint16 token shards, the
  document/sentence index, checksums and the manifest, atomically.
- **datasets**: ``load_dataset("text", sample_by="paragraph")`` (reading the file into an
  Arrow cache, one row per document), ``.map(batched=True, num_proc=N)`` (sentence split
  on line breaks, tokenization, writing ``input_ids`` as ``List(uint16)`` and sentence
  lengths to Arrow cache files), then ``save_to_disk`` (a copy into the output folder).
  The table also gives its time without ``save_to_disk``, since its map cache alone is
  usable (though it lives in the cache folder, not where the user asked).

MB/s is the corpus size over the seconds inside the process (imports and interpreter
start excluded on both sides; the wall time of the whole process is in the JSON).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, bench_env, corpus_path, disk_bytes, ensure_tokenizer
from benchmarks.peak_rss import run_measured

RESULTS = Path(__file__).resolve().parent / "results"
SIDES = ("ptm", "datasets")


def prepare_ptm(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> dict[str, Any]:
    """``prepare_corpus`` into an empty ``out``; seconds and counts."""
    from ptm_core.data.prepare import prepare_corpus

    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    prepared = prepare_corpus([corpus], out, tokenizer=tokenizer_dir, workers=workers)
    seconds = time.perf_counter() - start
    return {
        "total_s": seconds,
        "documents": prepared.num_documents,
        "tokens": prepared.num_tokens,
        "disk_bytes": disk_bytes(out),
    }


def prepare_datasets(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> dict[str, Any]:
    """The ``datasets`` side (:func:`benchmarks.storage.write_arrow`); seconds per phase."""
    from benchmarks.storage import write_arrow

    result = write_arrow(corpus, tokenizer_dir, out, workers)
    result["disk_bytes"] = disk_bytes(out)
    return result


def _child(side: str, *args: Path | int) -> dict[str, Any]:
    """One preparation (``corpus, tokenizer, out, workers``) in a fresh, measured process."""
    measured = run_measured(
        [sys.executable, "-m", "benchmarks.prepare_pair", "child", side, *map(str, args)],
        env=bench_env(),
        cwd=Path(__file__).resolve().parents[1],
        timeout=3600,
    )
    if measured.returncode != 0:
        raise RuntimeError(f"{side} preparation failed:\n{measured.output}")
    result = json.loads(measured.output.strip().splitlines()[-1])
    return {**result, **measured.to_dict()}


def run(size: str, workers: int, repeat: int, fmt: str = "txt") -> dict[str, Any]:
    """Alternate the two preparations ``repeat`` times; the JSON-ready results."""
    corpus = corpus_path(size, fmt)
    tokenizer = ensure_tokenizer(corpus_path(size))
    work = BENCH_DIR / "prepare_pair"
    outs = {side: work / f"{corpus.stem}-{side}" for side in SIDES}
    rounds: list[dict[str, Any]] = []
    for round_ in range(repeat):
        order = SIDES if round_ % 2 == 0 else SIDES[::-1]
        entry: dict[str, Any] = {}
        for side in order:
            print(f"prepare {side} (round {round_ + 1}/{repeat})", flush=True)
            entry[side] = _child(side, corpus, tokenizer, outs[side], workers)
        entry["datasets_over_ptm"] = entry["datasets"]["total_s"] / entry["ptm"]["total_s"]
        entry["datasets_no_save_over_ptm"] = (
            entry["datasets"]["load_s"] + entry["datasets"]["map_s"]
        ) / entry["ptm"]["total_s"]
        rounds.append(entry)
    mb = corpus.stat().st_size / 1e6

    def median(side: str, key: str = "total_s") -> float:
        return statistics.median(r[side][key] for r in rounds)

    no_save = statistics.median(r["datasets"]["load_s"] + r["datasets"]["map_s"] for r in rounds)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "corpus": {"path": str(corpus), "bytes": corpus.stat().st_size, "size": size},
        "workers": workers,
        "repeat": repeat,
        "command": " ".join(["python -m benchmarks.prepare_pair", *sys.argv[1:]]),
        "summary": {
            "ptm_s": median("ptm"),
            "datasets_s": median("datasets"),
            "datasets_no_save_s": no_save,
            "ptm_mb_per_s": mb / median("ptm"),
            "datasets_mb_per_s": mb / median("datasets"),
            "datasets_no_save_mb_per_s": mb / no_save,
            "ptm_over_datasets_speed": statistics.median(r["datasets_over_ptm"] for r in rounds),
            "ptm_over_datasets_no_save_speed": statistics.median(
                r["datasets_no_save_over_ptm"] for r in rounds
            ),
            "ptm_peak_tree_rss_mb": max(r["ptm"]["peak_tree_rss_mb"] for r in rounds),
            "datasets_peak_tree_rss_mb": max(r["datasets"]["peak_tree_rss_mb"] for r in rounds),
            "ptm_peak_tree_pss_mb": max(r["ptm"]["peak_tree_pss_mb"] for r in rounds),
            "datasets_peak_tree_pss_mb": max(r["datasets"]["peak_tree_pss_mb"] for r in rounds),
            "ptm_disk_mb": rounds[-1]["ptm"]["disk_bytes"] / 1e6,
            "datasets_disk_mb": rounds[-1]["datasets"]["disk_bytes"] / 1e6,
        },
        "rounds": rounds,
    }


def markdown(results: dict[str, Any]) -> str:
    """The side-by-side table."""
    s = results["summary"]
    mb = results["corpus"]["bytes"] / 1e6
    return (
        "\n".join(
            [
                f"Preparation of a {mb:.0f} MB generated corpus ({results['date']}, "
                f"{results['workers']} processes each, same `tokenizer.json`, median of "
                f"{results['repeat']} alternated rounds). Command: `{results['command']}`.",
                "",
                "| | ptm `prepare_corpus` | `datasets` load + map + save_to_disk | "
                "`datasets` load + map only |",
                "|---|---|---|---|",
                f"| seconds | {s['ptm_s']:.1f} | {s['datasets_s']:.1f} | "
                f"{s['datasets_no_save_s']:.1f} |",
                f"| MB/s of text | **{s['ptm_mb_per_s']:.2f}** | {s['datasets_mb_per_s']:.2f} | "
                f"{s['datasets_no_save_mb_per_s']:.2f} |",
                f"| ptm speed / this (paired median) | | **{s['ptm_over_datasets_speed']:.2f}x** | "
                f"{s['ptm_over_datasets_no_save_speed']:.2f}x |",
                "| per-round ratios | | "
                + ", ".join(f"{r['datasets_over_ptm']:.2f}" for r in results["rounds"])
                + " | "
                + ", ".join(f"{r['datasets_no_save_over_ptm']:.2f}" for r in results["rounds"])
                + " |",
                f"| peak memory of the process tree, PSS (RSS), MiB | "
                f"{s['ptm_peak_tree_pss_mb']:.0f} ({s['ptm_peak_tree_rss_mb']:.0f}) | "
                f"{s['datasets_peak_tree_pss_mb']:.0f} ({s['datasets_peak_tree_rss_mb']:.0f}) | |",
                f"| output on disk, MB | {s['ptm_disk_mb']:.1f} | {s['datasets_disk_mb']:.1f} | |",
            ]
        )
        + "\n"
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        side, corpus, tokenizer, out, workers = sys.argv[2:7]
        prepare = prepare_ptm if side == "ptm" else prepare_datasets
        result = prepare(Path(corpus), Path(tokenizer), Path(out), int(workers))
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="100MB")
    parser.add_argument("--format", choices=["txt", "jsonl"], default="txt")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = run(args.size, args.workers, args.repeat, args.format)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prepare_pair.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "prepare_pair.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
