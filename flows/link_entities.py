"""The `link_entities` flow: corpus -> linked corpus, sharded, cached, resumable."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from prefect import flow, task
from prefect.cache_policies import INPUTS

from ptm_core.atomic import atomic_write_text
from ptm_core.data import read_text_corpus

Shard = list[tuple[str, list[str]]]  # (doc_id, sentences)


def fingerprint_files(*paths: str | Path) -> str:
    """SHA-256 of the given files' bytes (the KG's identity for the cache key)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


@functools.lru_cache(maxsize=4)
def _linker(kg_dir: str, config_json: str) -> Any:
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    return EntityLinker(load_knowledge_graph(kg_dir), **json.loads(config_json))


@task(
    name="link-shard",
    cache_policy=INPUTS,
    persist_result=True,
    retries=2,
    retry_delay_seconds=[1, 5],
)
def link_shard(
    index: int, shard: Shard, source: str, kg_dir: str, kg_fingerprint: str, linker: dict, out: str
) -> str:
    """Link one shard and write it to ``out`` (atomically); cached on every input.

    The cache key covers the shard's documents, the KG fingerprint and the linker
    settings, so a re-run skips shards whose inputs did not change.
    """
    from ptm_knowledge.linking import link_documents, write_linked_corpus

    try:
        linked = link_documents(shard, _linker(kg_dir, json.dumps(linker, sort_keys=True)))
        write_linked_corpus(linked, out)
    except Exception as exc:
        raise RuntimeError(
            f"shard {index} (documents from {source}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    return out


@task(name="merge-shards", retries=2, retry_delay_seconds=[1, 5])
def merge_shards(paths: list[str], output: str) -> str:
    """Concatenate linked shards into one linked corpus, atomically."""
    text = "".join(Path(p).read_text(encoding="utf-8") for p in paths)
    atomic_write_text(output, text)
    return output


@flow(name="link_entities", log_prints=True)
def link_entities(
    corpus: str,
    kg_dir: str,
    output: str,
    shard_size: int = 8,
    linker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Link a text corpus against a KG and write a linked corpus (JSONL).

    The corpus is validated first (a bad line fails here, naming file and line), split
    into shards of ``shard_size`` documents mapped over ``link-shard`` tasks, and merged.
    Shard results are persisted: re-running after a crash, or with a grown corpus, only
    links the shards that are new or changed. For many cores or a cluster run it with
    a Dask task runner: ``link_entities.with_options(task_runner=DaskTaskRunner(...))``
    (``ptm link --dask``).

    Args:
        corpus: text-corpus file(s) or directory (``data_specs/text_corpus``).
        kg_dir: directory with ``entities.tsv`` (+ ``triples.tsv``).
        output: the linked corpus to write (``data_specs/linked_corpus``).
        shard_size: documents per task.
        linker: :class:`ptm_knowledge.linking.EntityLinker` keyword settings
            (``case``, ``threshold``, ``prior_weight``, ...).

    Returns:
        ``{"output", "shards", "executed", "mentions"}``; ``executed`` counts the shards
        linked in this run (the rest came from the cache).
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    documents = read_text_corpus(corpus)
    kg_path = Path(kg_dir)
    kg_files = sorted(p for p in kg_path.glob("*.tsv")) if kg_path.is_dir() else [kg_path]
    kg_fingerprint = fingerprint_files(*kg_files)
    settings = dict(linker or {})
    shard_dir = Path(output).resolve().parent / f".{Path(output).name}.shards"
    arguments = []
    for index, first in enumerate(range(0, len(documents), shard_size)):
        docs = documents[first : first + shard_size]
        shard: Shard = [(d.doc_id, list(d.sentences)) for d in docs]
        key = hashlib.sha256(
            json.dumps([shard, kg_fingerprint, settings], sort_keys=True).encode()
        ).hexdigest()[:20]
        out = str(shard_dir / f"{key}.jsonl")
        arguments.append(
            (index, shard, docs[0].source, str(kg_path), kg_fingerprint, settings, out)
        )
    futures = [link_shard.submit(*args) for args in arguments]
    for future in futures:
        future.wait()
    executed = sum(1 for f in futures if f.state.name != "Cached")
    paths = [f.result() for f in futures]
    for i, path in enumerate(paths):
        if not Path(path).exists():  # a cached result whose file was removed: link again
            paths[i] = link_shard.with_options(refresh_cache=True)(*arguments[i])
            executed += 1
    merged = merge_shards(paths, output)
    mentions = sum(
        len(json.loads(line)["mentions"])
        for line in Path(merged).read_text(encoding="utf-8").splitlines()
        if line.strip()
    )
    print(f"linked {len(documents)} documents in {len(paths)} shards ({executed} run now)")
    return {"output": merged, "shards": len(paths), "executed": executed, "mentions": mentions}
