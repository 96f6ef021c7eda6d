"""Linking and KG at scale: a generated 1M-entity / 10M-triple KG, ``ptm link`` on 10k/100k docs.

    python -m benchmarks.link_scale                                  # 1M / 10M, 10k and 100k
    python -m benchmarks.link_scale --entities 100000 --triples 1000000 --docs 10000

Generated under ``/tmp/ptm-bench/`` (once, reused):

- a KG in the ``data_specs/knowledge_graph`` format: ``entities.tsv`` with two-word
  capitalised names built from synthetic words (every name distinct), a type out of 20,
  an alias for 30% of the entities (an initial + surname, or the bare surname, which is
  ambiguous), a one-sentence description; ``triples.tsv`` with heads and tails drawn
  Zipf-like (a few hubs, a long tail) over 200 relations;
- text corpora (``.txt``) of N documents from :mod:`benchmarks.make_corpus` in which 40% of
  the sentences mention an entity by name or alias (entities drawn Zipf-like).

Each measurement is one fresh process, polled for memory (summed PSS of the tree: ``ptm
link`` also starts a temporary Prefect server), killed at ``--timeout`` seconds (10 min)
or when it passes ``--memory-limit`` MiB (the machine is shared):

- **KG load, cold**: ``load_knowledge_graph(kg, cache_dir=...)`` on an empty cache (parse,
  validate, build the CSR adjacency, store the arrays), then ``EntityLinker(kg)`` (alias
  index, phrase index): what the first ``ptm link`` on a new KG does.
- **KG load, warm**: the same with the cache filled (memory-mapped arrays): every later
  ``ptm link``, Dask worker and retry.
- **ptm link**: ``ptm link --corpus docs.txt --kg KG --output linked.jsonl`` (default
  shard size, warm KG cache), documents/s over the whole command (KG load and Prefect start
  included). Sizes are run smallest first; when one is killed the larger ones are skipped,
  and the table gives the growth over the sizes that finished.

"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.fixtures import BENCH_DIR, ROOT, bench_env
from benchmarks.make_corpus import CorpusGenerator, build_vocabulary
from benchmarks.peak_rss import run_measured

RESULTS = Path(__file__).resolve().parent / "results"
TYPES = [
    "person", "city", "country", "river", "organisation", "company", "award", "element",
    "mountain", "book", "film", "band", "language", "university", "ship", "species",
    "disease", "event", "building", "software",
]  # fmt: skip
RELATIONS = 200
CHUNK = 200_000


def _zipf_ids(rng: np.random.Generator, n: int, size: int, skew: float = 1.1) -> np.ndarray:
    """``size`` ids in ``[0, n)``, Zipf-like (id 0 most frequent), shuffled by a fixed map."""
    ranks = (rng.pareto(skew, size) * n / 50).astype(np.int64) % n
    return (ranks * 7919 + 13) % n  # a fixed permutation: hubs are not just the first ids


def entity_names(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """``n`` distinct two-word names as (first words, surnames), from synthetic words."""
    words = [w.capitalize() for w in build_vocabulary(60_000, seed=seed)[3000:]]
    side = int(np.ceil(np.sqrt(n)))
    if 2 * side > len(words):
        raise ValueError(f"{n} entities need {2 * side} distinct words, only {len(words)}")
    firsts, surnames = words[:side], words[side : 2 * side]
    return [firsts[i // side] for i in range(n)], [surnames[i % side] for i in range(n)]


def generate_kg(out: Path, entities: int, triples: int, seed: int = 0) -> Path:
    """Write ``entities.tsv`` and ``triples.tsv`` to ``out`` once (atomically, marked done)."""
    if (out / ".done").exists():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    firsts, surnames = entity_names(entities, seed)
    vocabulary = build_vocabulary(seed=seed)[:3000]
    with (tmp / "entities.tsv").open("w", encoding="utf-8") as handle:
        handle.write("id\tname\ttype\taliases\tdescription\n")
        for start in range(0, entities, CHUNK):
            stop = min(start + CHUNK, entities)
            kinds = rng.integers(0, len(TYPES), stop - start)
            alias_kind = rng.random(stop - start)
            words = rng.integers(0, len(vocabulary), (stop - start, 8))
            rows = []
            for offset, i in enumerate(range(start, stop)):
                first, surname = firsts[i], surnames[i]
                if alias_kind[offset] < 0.2:
                    alias = f"{first[0]}. {surname}"
                elif alias_kind[offset] < 0.3:
                    alias = surname
                else:
                    alias = ""
                kind = TYPES[kinds[offset]]
                about = " ".join(vocabulary[w] for w in words[offset])
                rows.append(
                    f"Q{i}\t{first} {surname}\t{kind}\t{alias}\tThis {kind} is known for {about}.\n"
                )
            handle.write("".join(rows))
    with (tmp / "triples.tsv").open("w", encoding="utf-8") as handle:
        for start in range(0, triples, CHUNK * 5):
            size = min(CHUNK * 5, triples - start)
            heads = _zipf_ids(rng, entities, size)
            tails = rng.integers(0, entities, size)
            relations = rng.integers(0, RELATIONS, size)
            handle.write(
                "".join(
                    f"Q{h}\trelation_{r}\tQ{t}\n"
                    for h, r, t in zip(
                        heads.tolist(), relations.tolist(), tails.tolist(), strict=True
                    )
                )
            )
    (tmp / ".done").write_text(json.dumps({"entities": entities, "triples": triples}) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def generate_documents(out: Path, documents: int, entities: int, seed: int = 0) -> Path:
    """A ``.txt`` corpus of ``documents`` documents mentioning KG entities (written once)."""
    marker = out.with_name(out.name + ".done")
    if out.exists() and marker.exists():
        return out
    rng = np.random.default_rng(seed + 1)
    firsts, surnames = entity_names(entities, seed)
    generator = CorpusGenerator(seed=seed + 2, documents_per_chunk=500)
    tmp = out.with_name(f".{out.name}.tmp")
    written = 0
    with tmp.open("w", encoding="utf-8") as handle:
        while written < documents:
            docs = [d for d in generator.chunk().split("\n\n") if d][: documents - written]
            parts = []
            for doc in docs:
                sentences = doc.split("\n")
                mention = rng.random(len(sentences)) < 0.4
                picks = _zipf_ids(rng, entities, len(sentences))
                for k in np.flatnonzero(mention):
                    words = sentences[k].split(" ")
                    i = int(picks[k])
                    name = f"{firsts[i]} {surnames[i]}"
                    at = int(rng.integers(1, max(2, len(words))))
                    words.insert(at, name)
                    sentences[k] = " ".join(words)
                parts.append("\n".join(sentences) + "\n\n")
            handle.write("".join(parts))
            written += len(docs)
    tmp.replace(out)
    marker.write_text(json.dumps({"documents": documents}) + "\n")
    return out


_KG_LOAD = """
import json, resource, sys, time
start = time.perf_counter()
from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.linking import EntityLinker
imported = time.perf_counter()
kg = load_knowledge_graph(sys.argv[1], cache_dir=sys.argv[2])
loaded = time.perf_counter()
kg.adjacency
indexed = time.perf_counter()
out = {"kg_load_s": loaded - imported, "adjacency_s": indexed - loaded, "entities": len(kg),
       "triples": len(kg.triples)}
print(json.dumps(out), flush=True)
linker = EntityLinker(kg)
built = time.perf_counter()
out.update(linker_build_s=built - indexed, phrases=len(linker.phrases),
           peak_rss_self_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print(json.dumps(out), flush=True)
"""


def _last_json(output: str) -> dict[str, Any]:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def kg_cache_root() -> Path:
    """``PTM_CACHE_DIR`` of the measured commands: the KG cache is ``<it>/kg``."""
    return BENCH_DIR / "ptm-cache"


def measure_kg_load(kg: Path, timeout: float, memory_limit: float, *, cold: bool) -> dict[str, Any]:
    """KG load (+ adjacency) and linker build in a fresh process; ``cold``: empty KG cache."""
    cache = kg_cache_root() / "kg"
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    measured = run_measured(
        [sys.executable, "-c", _KG_LOAD, str(kg), str(cache)],
        env=bench_env(),
        cwd=ROOT,
        timeout=timeout,
        rss_limit_mb=memory_limit,
        log=BENCH_DIR / "logs" / f"kg-load-{'cold' if cold else 'warm'}-{kg.name}.log",
    )
    return {**measured.to_dict(), **_last_json(measured.output), "tail": measured.output[-300:]}


def measure_link(
    corpus: Path, kg: Path, documents: int, timeout: float, memory_limit: float
) -> dict[str, Any]:
    """``ptm link`` over ``corpus`` in a fresh process (fresh output and shard cache)."""
    out = BENCH_DIR / "link" / f"{corpus.stem}-{kg.name}.jsonl"
    shutil.rmtree(out.parent / f".{out.name}.shards", ignore_errors=True)
    out.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    # Prefect's result store holds the shard tasks' cache records: a store left by an earlier
    # (killed) run would turn its shards into cache hits, so every run gets an empty one.
    results = out.parent / f".{out.name}.prefect-results"
    shutil.rmtree(results, ignore_errors=True)
    command = ["link", "--corpus", str(corpus), "--kg", str(kg), "--output", str(out), *LINK_ARGS]
    measured = run_measured(
        [sys.executable, "-m", "flows.cli", *command],
        env=bench_env(PTM_CACHE_DIR=str(kg_cache_root()), PREFECT_LOCAL_STORAGE_PATH=str(results)),
        cwd=ROOT,
        timeout=timeout,
        rss_limit_mb=memory_limit,
        log=BENCH_DIR / "logs" / f"link-{corpus.stem}-{kg.name}.log",
    )
    result: dict[str, Any] = {**measured.to_dict(), "documents": documents}
    if measured.returncode == 0:
        result["documents_per_s"] = documents / measured.wall_s
    else:
        result["tail"] = measured.output[-300:]
    shards = out.parent / f".{out.name}.shards"
    result["shards_written"] = len(list(shards.glob("*.jsonl"))) if shards.exists() else 0
    return result


BEFORE = (
    "Before the CSR adjacency and the phrase index (2026-11-23, same KG and limits): "
    "`load_knowledge_graph` took 101 s, `EntityLinker(kg)` was unfinished at 10 min "
    "(5.9 GB; `KnowledgeGraph.neighbours` scanned every triple per entity, and every alias "
    "was a spaCy pattern Doc), and `ptm link` on 10,000 documents linked none in 10 min; on "
    "a 100k-entity / 1M-triple KG the linker index was unfinished at 10 min as well."
)
SHARD_SIZE = 8  # ptm link's default --shard-size: documents per linked shard
# Extra `ptm link` flags (--link-args): "--legacy-linker" measures the linker before #38.
LINK_ARGS: list[str] = []


def measure_kg(
    entities: int, triples: int, docs: list[int], timeout: float, memory_limit: float
) -> dict[str, Any]:
    """Generate one KG and its documents; measure the KG load (cold, warm) and ``ptm link``."""
    start = time.perf_counter()
    kg = generate_kg(BENCH_DIR / f"kg-{entities}-{triples}", entities, triples)
    results: dict[str, Any] = {
        "kg": {
            "path": str(kg),
            "entities": entities,
            "triples": triples,
            "bytes": sum(p.stat().st_size for p in kg.glob("*.tsv")),
            "generated_s": time.perf_counter() - start,
        },
        "docs_requested": docs,
        "command": " ".join(["python -m benchmarks.link_scale", *sys.argv[1:]]),
    }
    for cold in (True, False):
        name = "kg_load_cold" if cold else "kg_load_warm"
        print(f"KG load, {'cold' if cold else 'warm'} ({entities} entities, {triples} triples)")
        results[name] = measure_kg_load(kg, timeout, memory_limit, cold=cold)
    results["link"] = {}
    for n in sorted(docs):
        corpus = generate_documents(BENCH_DIR / f"linkdocs-{n}-{entities}.txt", n, entities)
        print(f"ptm link, {n} documents", flush=True)
        result = measure_link(corpus, kg, n, timeout, memory_limit)
        result["corpus_bytes"] = corpus.stat().st_size
        results["link"][str(n)] = result
        if result["returncode"] != 0:
            break  # a larger input takes longer still
    return results


def run(
    entities: int, triples: int, docs: list[int], timeout: float, memory_limit: float
) -> dict[str, Any]:
    """Every measurement on the KG of ``entities`` / ``triples``."""
    return {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python -m benchmarks.link_scale", *sys.argv[1:]]),
        "timeout_s": timeout,
        "memory_limit_mb": memory_limit,
        "shard_size": SHARD_SIZE,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "main": measure_kg(entities, triples, docs, timeout, memory_limit),
    }


def _outcome(r: dict[str, Any]) -> str:
    if r.get("killed_at_mb"):
        return f"killed at {r['killed_at_mb'] / 1024:.1f} GiB after {r['wall_s']:.0f} s"
    if r.get("timed_out"):
        return f"killed at the {r['wall_s'] / 60:.0f} min limit"
    if r.get("returncode") != 0:
        return f"failed (exit {r.get('returncode')})"
    return "ok"


def _load_row(name: str, label: str, load: dict[str, Any]) -> str:
    detail = []
    for key, what in (
        ("kg_load_s", "load_knowledge_graph"),
        ("adjacency_s", "adjacency"),
        ("linker_build_s", "EntityLinker(kg)"),
    ):
        if key in load:
            detail.append(f"{what} {load[key]:.1f} s")
    if "linker_build_s" not in load:
        detail.append("EntityLinker(kg) unfinished")
    return (
        f"| {name}: {label} | {_outcome(load)} | {load['wall_s']:.0f} | "
        f"{load['peak_tree_pss_mb']:,.0f} | | {'; '.join(detail)} |"
    )


def _kg_rows(part: dict[str, Any]) -> list[str]:
    kg = part["kg"]
    name = f"{kg['entities']:,} entities / {kg['triples']:,} triples"
    rows = [
        _load_row(name, "KG load + adjacency + linker index, cold cache", part["kg_load_cold"]),
        _load_row(name, "the same, warm cache", part["kg_load_warm"]),
    ]
    for n in sorted(part["docs_requested"]):
        r = part["link"].get(str(n))
        if r is None:
            rows.append(
                f"| {name}: `ptm link`, {n:,} documents | not run: a smaller input did not "
                "finish within the limit | | | | |"
            )
            continue
        linked = r["shards_written"] * SHARD_SIZE
        speed = f"{r['documents_per_s']:.1f}" if "documents_per_s" in r else ""
        rows.append(
            f"| {name}: `ptm link`, {int(n):,} documents | {_outcome(r)} | {r['wall_s']:.0f} | "
            f"{r['peak_tree_pss_mb']:,.0f} | {speed} | {r['shards_written']} shards "
            f"(~{min(linked, int(n)):,} documents) linked |"
        )
    return rows


def _growth(part: dict[str, Any]) -> str:
    done = [(int(n), r) for n, r in part["link"].items() if r.get("returncode") == 0]
    if len(done) < 2:
        return ""
    done.sort()
    (n0, r0), (n1, r1) = done[0], done[-1]
    return (
        f"Growth over the sizes that finished ({n0:,} to {n1:,} documents, "
        f"{n1 / n0:.0f}x): peak memory {r0['peak_tree_pss_mb']:,.0f} to "
        f"{r1['peak_tree_pss_mb']:,.0f} MiB ({r1['peak_tree_pss_mb'] / r0['peak_tree_pss_mb']:.2f}x); "
        f"documents/s {r0['documents_per_s']:.1f} to {r1['documents_per_s']:.1f}. "
        "documents/s counts the fixed start (Prefect server, KG load, linker index) in every "
        f"run; past it, linking ran at {(n1 - n0) / (r1['wall_s'] - r0['wall_s']):.1f} "
        f"documents/s (({n1:,} - {n0:,}) / ({r1['wall_s']:.0f} - {r0['wall_s']:.0f}) s)."
    )


def markdown(results: dict[str, Any]) -> str:
    """The KG and linking table."""
    kg = results["main"]["kg"]
    lines = [
        f"Linking at scale ({results['date']}): a generated KG of {kg['entities']:,} entities "
        f"/ {kg['triples']:,} triples ({kg['bytes'] / 1e6:.0f} MB of TSV), documents of "
        f"generated text mentioning its entities. Limits per run: "
        f"{results['timeout_s'] / 60:.0f} min, {results['memory_limit_mb'] / 1024:.0f} GiB; "
        "memory is the summed PSS of the process tree (the temporary Prefect server "
        f"included). {results.get('cpus', '?')} CPUs, load average "
        f"{results.get('load_average', 0):.1f} at the start (a shared machine). "
        f"Command: `{results['command']}`.",
        "",
        "| run | outcome | wall s | peak memory, MiB | documents/s | detail |",
        "|---|---|---|---|---|---|",
        *_kg_rows(results["main"]),
    ]
    growth = _growth(results["main"])
    if growth:
        lines += ["", growth]
    lines += ["", BEFORE]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--entities", type=int, default=1_000_000)
    parser.add_argument("--triples", type=int, default=10_000_000)
    parser.add_argument("--docs", default="10000,100000")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--memory-limit", type=float, default=12 * 1024, help="MiB")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--link-args", default="", help="extra ptm link flags, e.g. --link-args=--legacy-linker"
    )
    args = parser.parse_args()
    docs = [int(d) for d in args.docs.split(",") if d]
    LINK_ARGS[:] = args.link_args.split()
    results = run(args.entities, args.triples, docs, args.timeout, args.memory_limit)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "link_scale.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "link_scale.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
