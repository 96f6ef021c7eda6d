"""Preparation throughput: the ``ptm prepare`` command vs Hugging Face ``datasets.map(batched=True)``.

    python -m benchmarks.prepare_pair                    # 100 MB corpus, 2 processes, 3 rounds
    python -m benchmarks.prepare_pair --size 10MB --repeat 1

Same generated corpus file, same WordPiece ``tokenizer.json`` (trained once on the corpus
by :func:`benchmarks.fixtures.ensure_tokenizer`), same number of processes
(``--workers N`` for ptm, ``num_proc=N`` for ``datasets``), ``TOKENIZERS_PARALLELISM=false``
on both sides. Each side runs as the fresh process a user starts, into an empty output
folder (ptm would otherwise find its output up to date and do nothing; the ``datasets``
caches are removed first); the two sides alternate, who goes first swapping every round,
and each ratio is the median of the per-round ratios.

What each side includes, from process start to exit (interpreter, imports, worker start):

- **ptm**: the command a user types, ``ptm prepare CORPUS --output OUT --tokenizer DIR
  --workers N``: reading the file, sentence splitting (``.txt``: a sentence per line;
  ``.jsonl``: ``split_sentences``), line validation, tokenization in worker processes,
  writing uint16 token shards, the document/sentence index, checksums and the manifest,
  atomically.
- **datasets**: a script doing ``load_dataset("text", sample_by="paragraph")`` (reading
  the file into an Arrow cache, one row per document), ``.map(batched=True, num_proc=N)``
  (sentence split on line breaks, tokenization, writing ``input_ids`` as ``List(uint16)``
  and sentence lengths to Arrow cache files), then ``save_to_disk`` (a copy into the output
  folder). Its in-process time without ``save_to_disk`` is given too, since its map cache
  alone is usable (though it lives in the cache folder, not where the user asked).

Wall time is the whole process; CPU time is user + system of the process and every worker
it started (``RUSAGE_CHILDREN``). MB/s is the corpus size over the wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
ROOT = Path(__file__).resolve().parents[1]


def ptm_command(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> list[str]:
    """The ``ptm prepare`` command line (the console script of this environment)."""
    script = Path(sys.executable).with_name("ptm")
    if not script.exists():
        raise SystemExit(f"{script} not found: install ptm in this environment (make setup)")
    return [
        str(script), "prepare", str(corpus), "--output", str(out),
        "--tokenizer", str(tokenizer_dir), "--workers", str(workers),
    ]  # fmt: skip


def prepare_datasets(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> dict[str, Any]:
    """The ``datasets`` side (:func:`benchmarks.storage.write_arrow`); seconds per phase."""
    from benchmarks.storage import write_arrow

    return write_arrow(corpus, tokenizer_dir, out, workers)


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _side(side: str, corpus: Path, tokenizer: Path, out: Path, workers: int) -> dict[str, Any]:
    """One preparation in a fresh, measured process: wall, CPU, memory, output size."""
    shutil.rmtree(out, ignore_errors=True)
    command = (
        ptm_command(corpus, tokenizer, out, workers)
        if side == "ptm"
        else [
            sys.executable, "-m", "benchmarks.prepare_pair", "child", "datasets",
            str(corpus), str(tokenizer), str(out), str(workers),
        ]
    )  # fmt: skip
    cpu = _cpu_children()
    measured = run_measured(command, env=bench_env(), cwd=ROOT, timeout=3600)
    cpu = _cpu_children() - cpu
    if measured.returncode != 0:
        raise RuntimeError(f"{side} preparation failed:\n{measured.output}")
    result: dict[str, Any] = {**measured.to_dict(), "cpu_s": cpu, "disk_bytes": disk_bytes(out)}
    if side == "datasets":
        result["phases"] = json.loads(measured.output.strip().splitlines()[-1])
    return result


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
            entry[side] = _side(side, corpus, tokenizer, outs[side], workers)
        ptm, theirs = entry["ptm"], entry["datasets"]
        entry["wall_ratio"] = theirs["wall_s"] / ptm["wall_s"]
        entry["cpu_ratio"] = theirs["cpu_s"] / ptm["cpu_s"]
        phases = theirs["phases"]
        entry["no_save_ratio"] = (phases["load_s"] + phases["map_s"]) / ptm["wall_s"]
        rounds.append(entry)
        print(
            f"  wall {ptm['wall_s']:.1f} s vs {theirs['wall_s']:.1f} s "
            f"({entry['wall_ratio']:.2f}x), CPU {ptm['cpu_s']:.1f} s vs {theirs['cpu_s']:.1f} s "
            f"({entry['cpu_ratio']:.2f}x)",
            flush=True,
        )
    mb = corpus.stat().st_size / 1e6

    def median(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in rounds)

    def ratio(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    return {
        "date": time.strftime("%Y-%m-%d"),
        "corpus": {"path": str(corpus), "bytes": corpus.stat().st_size, "size": size},
        "workers": workers,
        "repeat": repeat,
        "command": " ".join(["python -m benchmarks.prepare_pair", *sys.argv[1:]]),
        "load_average": list(os.getloadavg()),
        "summary": {
            "ptm_wall_s": median("ptm", "wall_s"),
            "datasets_wall_s": median("datasets", "wall_s"),
            "ptm_cpu_s": median("ptm", "cpu_s"),
            "datasets_cpu_s": median("datasets", "cpu_s"),
            "datasets_no_save_s": statistics.median(
                r["datasets"]["phases"]["load_s"] + r["datasets"]["phases"]["map_s"] for r in rounds
            ),
            "ptm_mb_per_s": mb / median("ptm", "wall_s"),
            "datasets_mb_per_s": mb / median("datasets", "wall_s"),
            "wall_ratio": ratio("wall_ratio"),
            "cpu_ratio": ratio("cpu_ratio"),
            "no_save_ratio": ratio("no_save_ratio"),
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
    rounds = results["rounds"]

    def per_round(key: str) -> str:
        return ", ".join(f"{r[key]:.2f}" for r in rounds)

    load = ", ".join(f"{x:.1f}" for x in results.get("load_average", ()))
    return (
        "\n".join(
            [
                f"Preparation of a {mb:.0f} MB generated corpus ({results['date']}, "
                f"{results['workers']} processes each, same `tokenizer.json`, median of "
                f"{results['repeat']} alternated rounds, load average at the end {load}). "
                f"Command: `{results['command']}`.",
                "",
                "Each side is a fresh process from start to exit: ptm is the command "
                "`ptm prepare CORPUS --output OUT --tokenizer DIR --workers N`; datasets is a "
                "script doing `load_dataset` + `map(batched=True, num_proc=N)` + "
                "`save_to_disk`. CPU time counts every worker process.",
                "",
                "| | `ptm prepare` (the command) | `datasets` load + map + save_to_disk |",
                "|---|---|---|",
                f"| wall seconds | {s['ptm_wall_s']:.1f} | {s['datasets_wall_s']:.1f} |",
                f"| CPU seconds (all processes) | {s['ptm_cpu_s']:.1f} | "
                f"{s['datasets_cpu_s']:.1f} |",
                f"| MB/s of text (wall) | **{s['ptm_mb_per_s']:.2f}** | "
                f"{s['datasets_mb_per_s']:.2f} |",
                f"| ptm speed / this, wall (per round: {per_round('wall_ratio')}) | | "
                f"**{s['wall_ratio']:.2f}x** |",
                f"| ptm speed / this, CPU time (per round: {per_round('cpu_ratio')}) | | "
                f"**{s['cpu_ratio']:.2f}x** |",
                f"| ptm wall / `datasets` load + map only, in-process "
                f"({s['datasets_no_save_s']:.1f} s) | | {s['no_save_ratio']:.2f}x |",
                f"| peak memory of the process tree, PSS (RSS), MiB | "
                f"{s['ptm_peak_tree_pss_mb']:.0f} ({s['ptm_peak_tree_rss_mb']:.0f}) | "
                f"{s['datasets_peak_tree_pss_mb']:.0f} ({s['datasets_peak_tree_rss_mb']:.0f}) |",
                f"| output on disk, MB | {s['ptm_disk_mb']:.1f} | {s['datasets_disk_mb']:.1f} |",
            ]
        )
        + "\n"
    )


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        _side_name, corpus, tokenizer, out, workers = sys.argv[2:7]
        result = prepare_datasets(Path(corpus), Path(tokenizer), Path(out), int(workers))
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
