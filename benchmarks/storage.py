"""Storage for prepared corpora: Arrow through Hugging Face ``datasets`` vs a numpy memmap.

    python -m benchmarks.storage                      # 100 MB corpus, 2 processes, 3 rounds
    python -m benchmarks.storage --size 10MB --repeat 1

Both sides store the same thing from the same generated corpus with the same WordPiece
tokenizer (``tokenizer.json``, through ``tokenizers``), no special tokens, with the same
number of worker processes: every document's token ids (uint16) and its sentence lengths.

- **arrow**: ``load_dataset("text", sample_by="paragraph")`` (one row per document),
  ``.map(tokenize, batched=True, num_proc=N)`` into ``input_ids`` (``List(uint16)``) and
  ``sentence_lengths`` (``List(int32)``), ``save_to_disk``; read back with
  ``load_from_disk(...).select_columns(["input_ids"]).with_format("numpy")``.
- **memmap** (Megatron-LM's ``.bin``/``.idx`` idea): the corpus streamed in batches of
  documents to a pool of N processes, the ids appended to ``tokens.bin`` (uint16), the
  sentence boundaries to ``sentences.idx`` (int64 token offsets) and the document
  boundaries to ``documents.idx`` (int64 sentence offsets); read back with ``np.memmap``.

Measured: write time (each write in a fresh process, the two alternated, median of
``--repeat``), bytes on disk, time to open and resident memory after open (fresh process,
page cache warm), and random-access reads (random documents, random 128-token windows
inside random documents) timed in alternating pairs in one process.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import shutil
import statistics
import sys
import time
from collections import deque
from collections.abc import Iterable, Iterator
from multiprocessing.pool import AsyncResult, Pool
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.fixtures import (
    BENCH_DIR,
    bench_env,
    corpus_path,
    disk_bytes,
    ensure_tokenizer,
    iter_documents,
)
from benchmarks.paired import time_paired
from benchmarks.peak_rss import run_measured, status_mb

RESULTS = Path(__file__).resolve().parent / "results"
BATCH_DOCUMENTS = 1000
WINDOW = 128
BACKENDS = ("arrow", "memmap")


# ----------------------------------------------------------------------------- tokenizing


@functools.cache
def _tokenizer(tokenizer_file: str) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_file)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def encode_documents(
    documents: list[list[str]], tokenizer_file: str
) -> tuple[list[list[int]], list[list[int]]]:
    """Token ids (no special tokens) and sentence lengths of each document."""
    flat = [s for document in documents for s in document]
    encodings = _tokenizer(tokenizer_file).encode_batch(flat, add_special_tokens=False)
    ids: list[list[int]] = []
    lengths: list[list[int]] = []
    position = 0
    for document in documents:
        chunk = encodings[position : position + len(document)]
        position += len(document)
        ids.append(list(itertools.chain.from_iterable(e.ids for e in chunk)))
        lengths.append([len(e.ids) for e in chunk])
    return ids, lengths


def _arrow_batch(batch: dict[str, list], tokenizer_file: str, jsonl: bool) -> dict[str, list]:
    """``datasets.map`` function: split each row into sentences, tokenize, keep ids + lengths."""
    if jsonl:
        from ptm_core.data.corpus import split_sentences

        documents = [split_sentences(text) for text in batch["text"]]
    else:
        documents = [
            [s for s in (x.strip() for x in text.split("\n")) if s] for text in batch["text"]
        ]
    ids, lengths = encode_documents(documents, tokenizer_file)
    return {"input_ids": ids, "sentence_lengths": lengths}


# ----------------------------------------------------------------------------- writers


def write_arrow(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> dict[str, float]:
    """Prepare ``corpus`` as a ``datasets`` Arrow dataset in ``out``; seconds per phase.

    The ``load_dataset`` and ``map`` caches go to ``<out>.cache`` (removed first, so
    nothing is served from an earlier run); their size is reported apart.
    """
    from datasets import Features, List, Value, load_dataset

    cache = out.with_name(out.name + ".cache")
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    jsonl = corpus.suffix == ".jsonl"
    start = time.perf_counter()
    if jsonl:
        dataset = load_dataset("json", data_files=str(corpus), split="train", cache_dir=str(cache))
    else:
        dataset = load_dataset(
            "text",
            data_files=str(corpus),
            sample_by="paragraph",
            split="train",
            cache_dir=str(cache),
        )
    loaded = time.perf_counter()
    features = Features(
        {"input_ids": List(Value("uint16")), "sentence_lengths": List(Value("int32"))}
    )
    dataset = dataset.map(
        _arrow_batch,
        batched=True,
        batch_size=BATCH_DOCUMENTS,
        num_proc=workers if workers > 1 else None,
        remove_columns=dataset.column_names,
        features=features,
        fn_kwargs={"tokenizer_file": str(tokenizer_dir / "tokenizer.json"), "jsonl": jsonl},
        load_from_cache_file=False,
    )
    mapped = time.perf_counter()
    dataset.save_to_disk(str(out))
    saved = time.perf_counter()
    return {
        "load_s": loaded - start,
        "map_s": mapped - loaded,
        "save_s": saved - mapped,
        "total_s": saved - start,
        "documents": len(dataset),
        "cache_bytes": disk_bytes(cache),
    }


def _encode_to_arrays(documents: list[list[str]], tokenizer_file: str) -> tuple[bytes, bytes]:
    """Pool task: ``(uint16 ids, int64 sentence lengths)`` of a batch, as raw bytes."""
    ids, lengths = encode_documents(documents, tokenizer_file)
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint16)
    sentence_lengths = np.fromiter(itertools.chain.from_iterable(lengths), dtype=np.int64)
    return flat.tobytes(), sentence_lengths.tobytes()


def _batches(documents: Iterable[list[str]], size: int) -> Iterator[list[list[str]]]:
    iterator = iter(documents)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def write_memmap(corpus: Path, tokenizer_dir: Path, out: Path, workers: int) -> dict[str, float]:
    """Prepare ``corpus`` as flat memmap files in ``out`` (atomically); seconds and counts.

    At most ``2 * workers`` batches are in flight, so memory stays flat: the corpus is read
    as it is tokenized.
    """
    tokenizer_file = str(tokenizer_dir / "tokenizer.json")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    tmp.mkdir(parents=True)
    start = time.perf_counter()
    n_tokens = n_sentences = n_documents = 0
    pool = Pool(workers) if workers > 1 else None
    pending: deque[AsyncResult | tuple[bytes, bytes, int]] = deque()
    with (
        (tmp / "tokens.bin").open("wb") as tokens,
        (tmp / "sentences.idx").open("wb") as sentences,
        (tmp / "documents.idx").open("wb") as documents,
    ):
        sentences.write(np.zeros(1, dtype=np.int64).tobytes())
        documents.write(np.zeros(1, dtype=np.int64).tobytes())

        def drain(result: Any) -> None:
            nonlocal n_tokens, n_sentences, n_documents
            (ids, lengths), count = result
            tokens.write(ids)
            sentence_lengths = np.frombuffer(lengths, dtype=np.int64)
            sentences.write((n_tokens + np.cumsum(sentence_lengths)).tobytes())
            n_tokens += len(ids) // 2
            n_sentences += len(sentence_lengths)
            n_documents += len(count)
            documents.write((n_sentences - len(sentence_lengths) + np.cumsum(count)).tobytes())

        for batch in _batches(iter_documents(corpus), BATCH_DOCUMENTS):
            counts = np.array([len(d) for d in batch], dtype=np.int64)
            if pool is None:
                drain((_encode_to_arrays(batch, tokenizer_file), counts))
                continue
            pending.append((pool.apply_async(_encode_to_arrays, (batch, tokenizer_file)), counts))
            while len(pending) >= 2 * workers:
                job, count = pending.popleft()
                drain((job.get(), count))
        while pending:
            job, count = pending.popleft()
            drain((job.get(), count))
    if pool is not None:
        pool.close()
        pool.join()
    meta = {"dtype": "uint16", "tokens": n_tokens, "sentences": n_sentences}
    meta["documents"] = n_documents
    (tmp / "meta.json").write_text(json.dumps(meta) + "\n")
    tmp.replace(out)
    return {"total_s": time.perf_counter() - start, "documents": n_documents, "tokens": n_tokens}


# ----------------------------------------------------------------------------- readers


class MemmapCorpus:
    """The memmap files of :func:`write_memmap`, opened read-only."""

    def __init__(self, directory: Path) -> None:
        meta = json.loads((directory / "meta.json").read_text())
        self.tokens = np.memmap(directory / "tokens.bin", dtype=meta["dtype"], mode="r")
        self.sentences = np.memmap(directory / "sentences.idx", dtype=np.int64, mode="r")
        self.documents = np.memmap(directory / "documents.idx", dtype=np.int64, mode="r")
        self.num_documents = len(self.documents) - 1

    def document(self, index: int) -> np.ndarray:
        """Token ids of one document (a copy)."""
        start = self.sentences[self.documents[index]]
        stop = self.sentences[self.documents[index + 1]]
        return np.array(self.tokens[start:stop])

    def window(self, index: int, offset: int, length: int) -> np.ndarray:
        """``length`` ids from ``offset`` inside document ``index`` (a copy)."""
        start = self.sentences[self.documents[index]] + offset
        stop = min(start + length, self.sentences[self.documents[index + 1]])
        return np.array(self.tokens[start:stop])


class ArrowCorpus:
    """The dataset of :func:`write_arrow`, opened with ``load_from_disk`` (memory-mapped)."""

    def __init__(self, directory: Path) -> None:
        from datasets import load_from_disk

        dataset = load_from_disk(str(directory))
        self.ids = dataset.select_columns(["input_ids"]).with_format("numpy")
        self.num_documents = len(dataset)

    def document(self, index: int) -> np.ndarray:
        """Token ids of one document."""
        return self.ids[index]["input_ids"]

    def window(self, index: int, offset: int, length: int) -> np.ndarray:
        """``length`` ids from ``offset`` inside document ``index``."""
        return self.ids[index]["input_ids"][offset : offset + length]


def open_corpus(backend: str, directory: Path) -> ArrowCorpus | MemmapCorpus:
    """Open a prepared corpus of either backend."""
    return ArrowCorpus(directory) if backend == "arrow" else MemmapCorpus(directory)


def measure_open(backend: str, directory: Path) -> dict[str, float]:
    """Import, open and resident memory of one backend (call in a fresh process)."""
    before = status_mb("VmRSS")
    start = time.perf_counter()
    if backend == "arrow":
        import datasets  # noqa: F401
    imported = time.perf_counter()
    after_import = status_mb("VmRSS")
    corpus = open_corpus(backend, directory)
    opened = time.perf_counter()
    after_open = status_mb("VmRSS")
    rng = np.random.default_rng(0)
    for index in rng.integers(0, corpus.num_documents, 1000):
        corpus.document(int(index))
    return {
        "import_s": imported - start,
        "open_s": opened - imported,
        "rss_before_mb": before,
        "rss_after_import_mb": after_import,
        "rss_after_open_mb": after_open,
        "rss_open_delta_mb": after_open - after_import,
        "rss_after_1k_reads_mb": status_mb("VmRSS"),
        "rss_anon_after_1k_reads_mb": status_mb("RssAnon"),
        "rss_file_after_1k_reads_mb": status_mb("RssFile"),
    }


def measure_reads(arrow_dir: Path, memmap_dir: Path, reads: int, pairs: int = 10) -> dict:
    """Random documents and random windows, both backends alternated in this process."""
    arrow, memmap = ArrowCorpus(arrow_dir), MemmapCorpus(memmap_dir)
    if arrow.num_documents != memmap.num_documents:
        raise RuntimeError(
            f"the two stores disagree: {arrow.num_documents} vs {memmap.num_documents} documents"
        )
    probe = int(np.random.default_rng(1).integers(arrow.num_documents))
    if not np.array_equal(arrow.document(probe), memmap.document(probe)):
        raise RuntimeError(f"document {probe} differs between the two stores")
    per_block = max(1, reads // pairs)
    rng = np.random.default_rng(0)
    documents = rng.integers(0, arrow.num_documents, per_block)
    lengths = np.array([len(memmap.document(int(i))) for i in documents])
    offsets = (rng.random(per_block) * np.maximum(lengths - WINDOW, 1)).astype(np.int64)
    out: dict[str, Any] = {}
    tasks = {
        "random documents": lambda c: [c.document(int(i)) for i in documents],
        f"random {WINDOW}-token windows": lambda c: [
            c.window(int(i), int(o), WINDOW) for i, o in zip(documents, offsets, strict=True)
        ],
    }
    for name, task in tasks.items():
        timing = time_paired(lambda t=task: t(memmap), lambda t=task: t(arrow), pairs=pairs)
        summary = timing.summary(per_block)
        out[name] = {
            "reads_per_s": {
                "memmap": summary["ptm"]["median"],
                "arrow": summary["reference"]["median"],
            },
            "memmap_over_arrow": summary["speedup_median"],
            "reads": per_block * pairs,
            "mean_tokens_per_document": float(lengths.mean()),
        }
    return out


# ----------------------------------------------------------------------------- driver


def _child(args: list[str], timeout: float = 3600) -> tuple[dict, dict]:
    """Run ``python -m benchmarks.storage <args>`` measured; its last stdout line is JSON."""
    measured = run_measured(
        [sys.executable, "-m", "benchmarks.storage", *args],
        env=bench_env(),
        cwd=Path(__file__).resolve().parents[1],
        timeout=timeout,
    )
    if measured.returncode != 0:
        raise RuntimeError(f"storage {args[0]} failed:\n{measured.output}")
    return json.loads(measured.output.strip().splitlines()[-1]), measured.to_dict()


def run(size: str, workers: int, repeat: int, reads: int) -> dict[str, Any]:
    """The whole comparison; returns the JSON-ready results."""
    corpus = corpus_path(size)
    tokenizer = ensure_tokenizer(corpus)
    work = BENCH_DIR / "storage"
    dirs = {b: work / f"{corpus.stem}-{b}" for b in BACKENDS}
    writes: dict[str, list[dict]] = {b: [] for b in BACKENDS}
    for round_ in range(repeat):
        order = BACKENDS if round_ % 2 == 0 else BACKENDS[::-1]
        for backend in order:
            print(f"write {backend} (round {round_ + 1}/{repeat})", flush=True)
            result, measured = _child(
                ["write", backend, str(corpus), str(tokenizer), str(dirs[backend]), str(workers)]
            )
            writes[backend].append({**result, "peak_tree_rss_mb": measured["peak_tree_rss_mb"]})
    opens = {b: [_child(["open", b, str(dirs[b])])[0] for _ in range(3)] for b in BACKENDS}
    read, _ = _child(["read", str(dirs["arrow"]), str(dirs["memmap"]), str(reads)])
    summary: dict[str, Any] = {}
    for backend in BACKENDS:
        summary[backend] = {
            "write_s_median": statistics.median(w["total_s"] for w in writes[backend]),
            "write_peak_tree_rss_mb_max": max(w["peak_tree_rss_mb"] for w in writes[backend]),
            "disk_bytes": disk_bytes(dirs[backend]),
            "open_s_median": statistics.median(o["open_s"] for o in opens[backend]),
            "rss_open_delta_mb_median": statistics.median(
                o["rss_open_delta_mb"] for o in opens[backend]
            ),
            "rss_after_open_mb_median": statistics.median(
                o["rss_after_open_mb"] for o in opens[backend]
            ),
            "rss_anon_after_1k_reads_mb_median": statistics.median(
                o["rss_anon_after_1k_reads_mb"] for o in opens[backend]
            ),
        }
    summary["arrow"]["cache_bytes"] = writes["arrow"][-1]["cache_bytes"]
    return {
        "date": time.strftime("%Y-%m-%d"),
        "corpus": {"path": str(corpus), "bytes": corpus.stat().st_size, "size": size},
        "workers": workers,
        "repeat": repeat,
        "command": " ".join(["python -m benchmarks.storage", *sys.argv[1:]]),
        "summary": summary,
        "writes": writes,
        "opens": opens,
        "reads": read,
    }


def markdown(results: dict[str, Any]) -> str:
    """The side-by-side table."""
    s = results["summary"]
    a, m = s["arrow"], s["memmap"]
    mb = results["corpus"]["bytes"] / 1e6
    lines = [
        f"Storage of a prepared {mb:.0f} MB corpus ({results['date']}, {results['workers']} "
        f"processes, write median of {results['repeat']}, alternated). "
        f"Command: `{results['command']}`.",
        "",
        "| | Arrow (`datasets`) | numpy memmap | Arrow / memmap |",
        "|---|---|---|---|",
        f"| write (read + split + tokenize + write), s | {a['write_s_median']:.1f} | "
        f"{m['write_s_median']:.1f} | {a['write_s_median'] / m['write_s_median']:.2f} |",
        f"| write, MB/s of text | {mb / a['write_s_median']:.2f} | "
        f"{mb / m['write_s_median']:.2f} | |",
        f"| write, peak RSS of the process tree, MiB | {a['write_peak_tree_rss_mb_max']:.0f} | "
        f"{m['write_peak_tree_rss_mb_max']:.0f} | |",
        f"| bytes on disk, MB | {a['disk_bytes'] / 1e6:.1f} (+ {a['cache_bytes'] / 1e6:.0f} "
        f"cache) | {m['disk_bytes'] / 1e6:.1f} | {a['disk_bytes'] / m['disk_bytes']:.2f} |",
        f"| open, ms (after imports) | {1000 * a['open_s_median']:.1f} | "
        f"{1000 * m['open_s_median']:.2f} | |",
        f"| RSS added by open, MiB | {a['rss_open_delta_mb_median']:.1f} | "
        f"{m['rss_open_delta_mb_median']:.1f} | |",
        f"| RSS after imports + open, MiB | {a['rss_after_open_mb_median']:.0f} | "
        f"{m['rss_after_open_mb_median']:.0f} | |",
        f"| anonymous RSS after 1k random documents, MiB | "
        f"{a['rss_anon_after_1k_reads_mb_median']:.0f} | "
        f"{m['rss_anon_after_1k_reads_mb_median']:.0f} | |",
    ]
    for name, r in results["reads"].items():
        lines.append(
            f"| {name}, reads/s (paired median) | {r['reads_per_s']['arrow']:,.0f} | "
            f"{r['reads_per_s']['memmap']:,.0f} | memmap **{r['memmap_over_arrow']:.1f}x** faster |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("write", "open", "read"):
        command, *rest = sys.argv[1:]
        if command == "write":
            backend, corpus, tokenizer, out, workers = rest
            writer = write_arrow if backend == "arrow" else write_memmap
            result = writer(Path(corpus), Path(tokenizer), Path(out), int(workers))
        elif command == "open":
            result = measure_open(rest[0], Path(rest[1]))
        else:
            result = measure_reads(Path(rest[0]), Path(rest[1]), int(rest[2]))
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", default="100MB")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reads", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = run(args.size, args.workers, args.repeat, args.reads)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "storage.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "storage.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
