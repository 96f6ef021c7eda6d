"""``ptm extend-vocab`` time and peak memory at three domain-corpus sizes (1, 10, 100 MB).

    python -m benchmarks.extend_vocab_scale --sizes 1,10,100

The corpus is :mod:`benchmarks.domain_corpus`'s drug-class text, generated to each size
(cached under ``$PTM_BENCH_DIR/extend-vocab``); the model is the gain suite's BERT-tiny
``final/`` (:func:`benchmarks.finetune_gain.pretrain_gain`, reused when cached). Each size
is the command a user types, start-up included, timed with its process tree's peak RSS
(:func:`benchmarks.peak_rss.run_measured`). Writes
``benchmarks/results/extend_vocab_scale.{md,json}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from benchmarks.domain_corpus import compounds, write_corpus
from benchmarks.finetune_gain import RESULTS, pretrain_gain
from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env
from benchmarks.peak_rss import run_measured

DOCUMENTS_PER_MB = 3570  # documents of 6 sentences: ~0.28 kB each


def corpus_of(megabytes: int) -> Path:
    path = BENCH_DIR / "extend-vocab" / f"domain-{megabytes}mb.txt"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        write_corpus(tmp, compounds(), DOCUMENTS_PER_MB * megabytes)
        tmp.replace(path)
    return path


def measure(model: Path, megabytes: int) -> dict[str, Any]:
    corpus = corpus_of(megabytes)
    out = BENCH_DIR / "extend-vocab" / f"out-{megabytes}mb"
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "flows.cli", "extend-vocab", str(model)]
    command += ["--corpus", str(corpus), "--output", str(out), "--max-new", "300"]
    measured = run_measured(command, env=bench_env(OMP_NUM_THREADS="1"), cwd=ROOT)
    if measured.returncode != 0:
        raise RuntimeError(f"extend-vocab failed on {corpus} (exit {measured.returncode})")
    added = json.loads((out / "vocab_extension.json").read_text())
    row = {
        "megabytes": corpus.stat().st_size / 1e6,
        "wall_s": measured.wall_s,
        "mb_per_s": corpus.stat().st_size / 1e6 / measured.wall_s,
        "peak_rss_mb": measured.peak_rss_mb,
        "words_added": len(added["words"]),
    }
    print(row, flush=True)
    return row


def render(record: dict[str, Any]) -> str:
    lines = [
        "# `ptm extend-vocab`: time and memory by corpus size",
        "",
        f"`{record['command']}` ({record['machine']}). The gain suite's BERT-tiny `final/` "
        "(2,555 WordPiece ids), the generated drug-class corpus (`benchmarks/domain_corpus.py`) "
        "at each size, `--max-new 300`; wall time of the command as typed (Python start-up, "
        "imports and the write of the model folder included), peak RSS of its process.",
        "",
        "| corpus (MB) | wall (s) | MB/s | peak RSS (MiB) | words added |",
        "|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        lines.append(
            f"| {row['megabytes']:.1f} | {row['wall_s']:.1f} | {row['mb_per_s']:.2f} | "
            f"{row['peak_rss_mb']:.0f} | {row['words_added']} |"
        )
    if record.get("note"):
        lines += ["", record["note"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10,100", help="corpus sizes in MB")
    parser.add_argument("--note", default="")
    args = parser.parse_args(argv)
    model, _ = pretrain_gain(1200, 1)
    rows = [measure(model, int(size)) for size in args.sizes.split(",")]
    record = {
        "command": "python -m benchmarks.extend_vocab_scale "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
        "machine": f"{platform.machine()}, {platform.python_version()}, a shared 2-core machine",
        "rows": rows,
        "note": args.note,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "extend_vocab_scale.json").write_text(json.dumps(record, indent=1) + "\n")
    (RESULTS / "extend_vocab_scale.md").write_text(render(record))
    print(render(record))


if __name__ == "__main__":
    main()
