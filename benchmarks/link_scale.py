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

- **KG load**: ``load_knowledge_graph`` then ``EntityLinker(kg)`` (the alias table, the
  context bags and the spaCy phrase patterns: what every ``ptm link`` builds first).
- **ptm link**: ``ptm link --corpus docs.txt --kg KG --output linked.jsonl`` (default
  shard size), documents/s over the whole command (KG load and Prefect start included).

A run that is killed is recorded as such, with how far it got: the baseline for issue 14
item 5 ("the KG loader and linker index handle a 1M-entity / 10M-triple KG").
"""

from __future__ import annotations

import argparse
import json
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
import json, sys, time
from pathlib import Path
start = time.perf_counter()
from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.linking import EntityLinker
imported = time.perf_counter()
kg = load_knowledge_graph(sys.argv[1])
loaded = time.perf_counter()
print(json.dumps({"kg_load_s": loaded - imported, "entities": len(kg)}), flush=True)
linker = EntityLinker(kg)
built = time.perf_counter()
print(json.dumps({"kg_load_s": loaded - imported, "linker_build_s": built - loaded,
                  "entities": len(kg)}), flush=True)
"""


def _last_json(output: str) -> dict[str, Any]:
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def measure_kg_load(kg: Path, timeout: float, memory_limit: float) -> dict[str, Any]:
    """KG load and linker build in a fresh process."""
    measured = run_measured(
        [sys.executable, "-c", _KG_LOAD, str(kg)],
        env=bench_env(),
        cwd=ROOT,
        timeout=timeout,
        rss_limit_mb=memory_limit,
        log=BENCH_DIR / "logs" / f"kg-load-{kg.name}.log",
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
    command = ["link", "--corpus", str(corpus), "--kg", str(kg), "--output", str(out)]
    measured = run_measured(
        [sys.executable, "-m", "flows.cli", *command],
        env=bench_env(),
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


SHARD_SIZE = 8  # ptm link's default --shard-size: documents per linked shard


def measure_kg(
    entities: int, triples: int, docs: list[int], timeout: float, memory_limit: float
) -> dict[str, Any]:
    """Generate one KG and its documents; measure the KG load and each ``ptm link``."""
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
    print(f"KG load ({entities} entities, {triples} triples)", flush=True)
    results["kg_load"] = measure_kg_load(kg, timeout, memory_limit)
    results["link"] = {}
    for n in docs:
        corpus = generate_documents(BENCH_DIR / f"linkdocs-{n}-{entities}.txt", n, entities)
        print(f"ptm link, {n} documents", flush=True)
        result = measure_link(corpus, kg, n, timeout, memory_limit)
        result["corpus_bytes"] = corpus.stat().st_size
        results["link"][str(n)] = result
        if result["returncode"] != 0:
            break  # a larger input fails the same way, later
    return results


def run(
    entities: int,
    triples: int,
    docs: list[int],
    timeout: float,
    memory_limit: float,
    *,
    small_kg: tuple[int, int] | None = (100_000, 1_000_000),
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The KG of ``entities``/``triples``, then (if linking failed on it) a smaller one.

    Args:
        small_kg: ``(entities, triples)`` of a KG measured with the first document count
            when no ``ptm link`` run on the large KG finished, so the next session has a
            documents/s figure; ``None`` to skip.
        previous: results of an earlier run whose large-KG part is kept (not measured again).
    """
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join(["python -m benchmarks.link_scale", *sys.argv[1:]]),
        "timeout_s": timeout,
        "memory_limit_mb": memory_limit,
        "shard_size": SHARD_SIZE,
    }
    results["main"] = (previous or {}).get("main") or measure_kg(
        entities, triples, docs, timeout, memory_limit
    )
    finished = any(r["returncode"] == 0 for r in results["main"]["link"].values())
    if small_kg is not None and not finished:
        results["small"] = measure_kg(*small_kg, docs[:1], timeout, memory_limit)
    return results


def _outcome(r: dict[str, Any]) -> str:
    if r.get("killed_at_mb"):
        return f"killed at {r['killed_at_mb'] / 1024:.1f} GiB after {r['wall_s']:.0f} s"
    if r.get("timed_out"):
        return f"killed at the {r['wall_s'] / 60:.0f} min limit"
    if r.get("returncode") != 0:
        return f"failed (exit {r.get('returncode')})"
    return "ok"


def _kg_rows(part: dict[str, Any]) -> list[str]:
    kg, load = part["kg"], part["kg_load"]
    name = f"{kg['entities']:,} entities / {kg['triples']:,} triples"
    detail = []
    if "kg_load_s" in load:
        detail.append(f"load_knowledge_graph {load['kg_load_s']:.0f} s")
    detail.append(
        f"EntityLinker(kg) {load['linker_build_s']:.0f} s"
        if "linker_build_s" in load
        else "EntityLinker(kg) unfinished"
    )
    rows = [
        f"| {name}: KG load + linker index | {_outcome(load)} | {load['wall_s']:.0f} | "
        f"{load['peak_tree_pss_mb']:,.0f} | | {'; '.join(detail)} |"
    ]
    for n in part["docs_requested"]:
        r = part["link"].get(str(n))
        if r is None:
            rows.append(
                f"| {name}: `ptm link`, {n:,} documents | not run: the smaller input was "
                "killed first, it would fail the same way | | | | |"
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


def _commands(results: dict[str, Any]) -> str:
    """The command of each KG's rows (the large KG's may come from an earlier run)."""
    parts = [results[k] for k in ("main", "small") if k in results]
    commands = list(
        dict.fromkeys(p.get("command", "python -m benchmarks.link_scale") for p in parts)
    )
    if len(commands) == 1:
        return f"Command: `{commands[0]}`."
    return "Commands: " + "; ".join(f"`{c}`" for c in commands) + "."


def markdown(results: dict[str, Any]) -> str:
    """The KG and linking table."""
    kg = results["main"]["kg"]
    lines = [
        f"Linking at scale ({results['date']}): a generated KG of {kg['entities']:,} entities "
        f"/ {kg['triples']:,} triples ({kg['bytes'] / 1e6:.0f} MB of TSV), documents of "
        f"generated text mentioning its entities. Limits per run: "
        f"{results['timeout_s'] / 60:.0f} min, {results['memory_limit_mb'] / 1024:.0f} GiB; "
        "memory is the summed PSS of the process tree (the temporary Prefect server "
        f"included). {_commands(results)}",
        "",
        "| run | outcome | wall s | peak memory, MiB | documents/s | detail |",
        "|---|---|---|---|---|---|",
        *_kg_rows(results["main"]),
    ]
    if "small" in results:
        lines += _kg_rows(results["small"])
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
    parser.add_argument(
        "--small-kg",
        default="100000x1000000",
        help="ENTITIESxTRIPLES measured when linking on the large KG fails ('' to skip)",
    )
    parser.add_argument(
        "--keep-main",
        action="store_true",
        help="keep the large-KG results of --out/link_scale.json; measure only the small KG",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    docs = [int(d) for d in args.docs.split(",") if d]
    small = tuple(int(x) for x in args.small_kg.split("x")) if args.small_kg else None
    previous = None
    if args.keep_main:
        previous = json.loads((args.out / "link_scale.json").read_text())
    results = run(
        args.entities,
        args.triples,
        docs,
        args.timeout,
        args.memory_limit,
        small_kg=small,  # type: ignore[arg-type]
        previous=previous,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "link_scale.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown(results)
    (args.out / "link_scale.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
