"""How GloVe's co-occurrence counting grows with the corpus: time, peak memory, nonzeros.

    nice -n 19 python -m benchmarks.static_scaling --words 250000 1000000 4000000

For each size a Zipfian corpus (``--types`` word types, p(rank r) ~ 1/r, 20-word sentences,
one per line) is written to a temporary ``.txt`` file, then a fresh process streams it
through :class:`ptm_classic.static.corpus.SentenceCorpus`, builds the vocabulary
(``min_count=5``) and counts co-occurrences (window 10, symmetric, 1/d) with
:func:`ptm_classic.static.glove.count_cooccurrences`. Reported per size: counting seconds,
the peak of Python + numpy/scipy allocations during counting (``tracemalloc``), the
process's peak RSS, the matrix's nonzeros and the bytes its CSR arrays take. The claim
under test: memory follows the nonzeros of ``X`` (plus one chunk), not the corpus size.
Writes ``benchmarks/results/static_scaling.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).parent / "results"


def write_corpus(path: Path, words: int, types: int, seed: int = 0) -> None:
    """A Zipfian corpus of ``words`` words, 20 per line."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, types + 1)
    p = 1.0 / ranks
    p /= p.sum()
    vocab = np.array([f"w{r}" for r in ranks])
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, words, 200_000):
            ids = rng.choice(types, size=min(200_000, words - start), p=p)
            tokens = vocab[ids]
            for row in range(0, len(tokens), 20):
                out.write(" ".join(tokens[row : row + 20]) + "\n")


def measure_one(path: Path, window: int, min_count: int) -> dict[str, Any]:
    """Vocabulary + counting of one corpus, in this process."""
    from ptm_classic.static.corpus import SentenceCorpus, build_vocabulary
    from ptm_classic.static.glove import count_cooccurrences

    corpus = SentenceCorpus(path)
    started = time.perf_counter()
    vocabulary = build_vocabulary(corpus, min_count=min_count)
    vocab_s = time.perf_counter() - started
    tracemalloc.start()
    started = time.perf_counter()
    matrix = count_cooccurrences(corpus, vocabulary.ids, window=window)
    count_s = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    csr_bytes = matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes
    return {
        "corpus_words": vocabulary.total_words,
        "corpus_mb": path.stat().st_size / 2**20,
        "vocabulary": len(vocabulary),
        "vocab_s": vocab_s,
        "count_s": count_s,
        "words_per_s": vocabulary.total_words / count_s,
        "nonzeros": int(matrix.nnz),
        "csr_mb": csr_bytes / 2**20,
        "peak_traced_mb": peak / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, nargs="+", default=[250_000, 1_000_000, 4_000_000])
    parser.add_argument("--types", type=int, default=50_000)
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure_one(args.one, args.window, args.min_count)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for words in args.words:
            path = Path(tmp) / f"zipf-{words}.txt"
            write_corpus(path, words, args.types)
            done = subprocess.run(
                [sys.executable, "-m", "benchmarks.static_scaling", "--one", str(path),
                 "--window", str(args.window), "--min-count", str(args.min_count)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(json.dumps(row), flush=True)
    RESULTS.mkdir(exist_ok=True)
    settings = {"types": args.types, "window": args.window, "min_count": args.min_count}
    (RESULTS / "static_scaling.json").write_text(
        json.dumps({"settings": settings, "rows": rows}, indent=2) + "\n", encoding="utf-8"
    )
    lines = [
        "# GloVe co-occurrence counting: growth with corpus size",
        "",
        f"Zipfian corpus, {args.types} types, window {args.window} (symmetric, 1/d), "
        f"min_count {args.min_count}; one process per size.",
        "",
        "| words | corpus MB | vocab | count s | words/s | nonzeros | CSR MB | peak traced MB "
        "| peak RSS MB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['corpus_words']:,} | {r['corpus_mb']:.1f} | {r['vocabulary']:,} | "
            f"{r['count_s']:.1f} | {r['words_per_s']:,.0f} | {r['nonzeros']:,} | "
            f"{r['csr_mb']:.1f} | {r['peak_traced_mb']:.1f} | {r['peak_rss_mb']:.0f} |"
        )
    (RESULTS / "static_scaling.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
