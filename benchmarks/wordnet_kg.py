"""WordNet 3.0 -> KG: time and peak memory of reading the database and writing the KGs.

    nice -n 10 python -m benchmarks.wordnet_kg [--wordnet-dir /usr/share/wordnet] [--repeats 3]

Each stage runs in a fresh process (``ru_maxrss`` is that process's peak RSS), ``--repeats``
times; the table gives the median wall times and the largest peak:

- **read nouns**: ``read_wordnet(pos=("n",))``: the 82,115 noun synsets and their index;
- **full noun KG**: the same, then ``write_wordnet_kg`` (``entities.tsv`` + ``triples.tsv``);
- **WN18RR-style**: ``read_wordnet(pos="nvar")`` then ``write_wn18rr_style`` (selection,
  split, five files);
- **ptm wordnet-kg**: the command line, end to end (``--style wn18rr``), polled for memory.

The memory a stage adds is its peak minus the RSS right after the imports (importing
``ptm_knowledge.kg`` pulls in torch for the KG-embedding module). Writes
``benchmarks/results/wordnet_kg.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env
from benchmarks.peak_rss import run_measured

RESULTS = Path(__file__).resolve().parent / "results"

_STAGE = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from ptm_knowledge.kg.wordnet import read_wordnet, write_wordnet_kg
from ptm_knowledge.kg.wn18rr import write_wn18rr_style
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {"import_s": time.perf_counter() - t0, "rss_after_import_mb": rss()}
stage, directory, target = sys.argv[1:4]
t = time.perf_counter()
wordnet = read_wordnet(directory, pos="n" if stage != "wn18rr" else "nvar")
out["read_s"] = time.perf_counter() - t
out["synsets"] = len(wordnet)
t = time.perf_counter()
if stage == "full":
    kg = write_wordnet_kg(wordnet, target)
    out.update(entities=kg.entities, triples=kg.triples)
elif stage == "wn18rr":
    summary = write_wn18rr_style(wordnet, target).summary()
    out.update({k: summary[k] for k in ("entities", "train", "valid", "test")})
out["write_s"] = time.perf_counter() - t
out["peak_rss_mb"] = rss()
print(json.dumps(out))
"""

STAGES = {"read": "read nouns", "full": "full noun KG", "wn18rr": "WN18RR-style"}


def _stage(stage: str, directory: str, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats):
        target = BENCH_DIR / "wordnet" / stage
        shutil.rmtree(target, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, "-c", _STAGE, stage, directory, str(target)],
            capture_output=True,
            text=True,
            check=True,
            env=bench_env(),
            cwd=ROOT,
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    result = {k: v for k, v in runs[0].items() if not k.endswith(("_s", "_mb"))}
    for key in ("import_s", "read_s", "write_s"):
        result[key] = round(statistics.median(r[key] for r in runs), 2)
    result["rss_after_import_mb"] = round(max(r["rss_after_import_mb"] for r in runs))
    result["peak_rss_mb"] = round(max(r["peak_rss_mb"] for r in runs))
    result["added_mb"] = result["peak_rss_mb"] - result["rss_after_import_mb"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wordnet-dir", default="/usr/share/wordnet")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {key: _stage(key, args.wordnet_dir, args.repeats) for key in STAGES}
    target = BENCH_DIR / "wordnet" / "cli"
    shutil.rmtree(target, ignore_errors=True)
    ptm = str(Path(sys.executable).parent / "ptm")
    command = [ptm, "wordnet-kg", str(target), "--style", "wn18rr"]
    measured = run_measured([*command, "--wordnet-dir", args.wordnet_dir], env=bench_env())
    results["cli"] = measured.to_dict()
    results["command"] = f"nice -n 10 python -m benchmarks.wordnet_kg --repeats {args.repeats}"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "wordnet_kg.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        "# WordNet 3.0 -> KG: time and peak memory",
        "",
        f"`{results['command']}` (median of {args.repeats} fresh processes; shared 2-core "
        "machine). Peak = the process's peak RSS; added = peak minus the RSS after the imports "
        "(torch comes with `ptm_knowledge.kg`).",
        "",
        "| stage | synsets | output | import s | read s | write s | peak MiB | added MiB |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for key, name in STAGES.items():
        r = results[key]
        output = {
            "read": "-",
            "full": f"{r.get('entities')} entities, {r.get('triples')} triples",
            "wn18rr": f"{r.get('entities')} entities, {r.get('train')}/{r.get('valid')}/"
            f"{r.get('test')} triples",
        }[key]
        lines.append(
            f"| {name} | {r['synsets']} | {output} | {r['import_s']} | {r['read_s']} | "
            f"{r['write_s']} | {r['peak_rss_mb']} | {r['added_mb']} |"
        )
    cli = results["cli"]
    lines += [
        "",
        f"`ptm wordnet-kg OUT --style wn18rr`, end to end: {cli['wall_s']:.1f} s, peak RSS "
        f"{cli['peak_rss_mb']:.0f} MiB (exit {cli['returncode']}).",
    ]
    (RESULTS / "wordnet_kg.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
