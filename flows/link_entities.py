"""The `link_entities` flow: corpus -> linked corpus, sharded, cached, resumable."""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from prefect import Task, flow, task
from prefect.cache_policies import INPUTS
from prefect.client.schemas.objects import State, TaskRun

from ptm_core.atomic import atomic_write_text
from ptm_core.data import read_text_corpus

Shard = list[tuple[str, list[str]]]  # (doc_id, sentences)

# Shard files are named by the first KEY_LENGTH hex digits of their inputs' hash.
KEY_LENGTH = 20

# Errors that recur on every attempt however long one waits: a path that is missing, not a
# file, not readable or a link loop. Retrying them only repeats the failure.
_PERMANENT_OS_ERRORS = (
    FileNotFoundError,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
_PERMANENT_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.EROFS})


def is_transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed where ``exc`` failed.

    Only an :class:`OSError` (at the root of the ``__cause__`` chain, as ``link-shard``
    wraps errors with its shard) that is not about the path itself counts: an I/O error, a
    full queue, a dropped connection to a Dask worker. Data errors (``ValueError``, so
    every ``DataError``), missing files and bugs fail the same way on every attempt.
    """
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return (
        isinstance(exc, OSError)
        and not isinstance(exc, _PERMANENT_OS_ERRORS)
        and exc.errno not in _PERMANENT_ERRNOS
    )


def retry_if_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect ``retry_condition_fn``: retry a failed task only for a transient error."""
    error = state.data
    if isinstance(error, BaseException):
        return is_transient(error)
    return True  # a failure without its exception at hand: keep Prefect's default


def remove_stale_temp_files(directory: Path, name: str) -> list[Path]:
    """Remove temporary files that a killed run left while writing ``directory/<name>``.

    Only names :mod:`ptm_core.atomic` writes match: ``.<name>.<random>.tmp``, where
    ``name`` is a regular expression for the final file's name.

    Returns:
        The files removed.
    """
    pattern = re.compile(rf"\.(?:{name})\.[a-z0-9_]+\.tmp")
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for path in directory.iterdir():
            if pattern.fullmatch(path.name) and path.is_file() and not path.is_symlink():
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    removed.append(path)
    return removed


def fingerprint_files(*paths: str | Path) -> str:
    """SHA-256 of the given files' bytes (the KG's identity for the cache key)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()


def _kg_files(kg_dir: str | Path) -> list[Path]:
    """The KG's files, each checked to exist: a clear error for a missing path or a loop."""
    from ptm_knowledge.kg import KGError

    kg_path = Path(kg_dir)
    # is_dir() is False for a link loop too; the stat() below then says which it is.
    files = sorted(kg_path.glob("*.tsv")) if kg_path.is_dir() else [kg_path]
    for path in files:
        try:
            path.stat()  # follows links: a loop fails here with ELOOP
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                problem = "a symbolic link loop (a link that points back at itself)"
                fix = "point --kg at the real folder (`ls -l` shows each link's target)"
            elif isinstance(exc, FileNotFoundError):
                problem, fix = "no such file or folder", "give the folder with entities.tsv"
            else:
                problem, fix = f"cannot be read ({exc.strerror})", "check the path"
            raise KGError(path, None, "path", problem, fix) from None
    return files


# The fingerprint is part of the key so a KG edited in place is reloaded in a long-lived
# process (a Dask worker, a test session) rather than served from this cache.
@functools.lru_cache(maxsize=4)
def _linker(kg_dir: str, kg_fingerprint: str, config_json: str) -> Any:
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    return EntityLinker(load_knowledge_graph(kg_dir), **json.loads(config_json))


@task(
    name="link-shard",
    cache_policy=INPUTS,
    persist_result=True,
    retries=2,
    retry_delay_seconds=[1, 5],
    retry_condition_fn=retry_if_transient,
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
        settings = json.dumps(linker, sort_keys=True)
        linked = link_documents(shard, _linker(kg_dir, kg_fingerprint, settings))
        write_linked_corpus(linked, out)
    except Exception as exc:
        raise RuntimeError(
            f"shard {index} (documents from {source}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    return out


@task(
    name="merge-shards",
    retries=2,
    retry_delay_seconds=[1, 5],
    retry_condition_fn=retry_if_transient,
)
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
    kg_fingerprint = fingerprint_files(*_kg_files(kg_path))
    settings = dict(linker or {})
    # Load and validate the KG (and the linker settings) once, here: a data error fails the
    # flow with its file and line instead of failing, and being retried, in every shard.
    # With the default thread runner the tasks reuse this linker (_linker is cached).
    _linker(str(kg_path), kg_fingerprint, json.dumps(settings, sort_keys=True))
    output_path = Path(output).resolve()
    shard_dir = output_path.parent / f".{output_path.name}.shards"
    # Temporary files of a killed run: never read (names start with "."), but they pile up.
    remove_stale_temp_files(shard_dir, rf"[0-9a-f]{{{KEY_LENGTH}}}\.jsonl")
    remove_stale_temp_files(output_path.parent, re.escape(output_path.name))
    arguments = []
    for index, first in enumerate(range(0, len(documents), shard_size)):
        docs = documents[first : first + shard_size]
        shard: Shard = [(d.doc_id, list(d.sentences)) for d in docs]
        key = hashlib.sha256(
            json.dumps([shard, kg_fingerprint, settings], sort_keys=True).encode()
        ).hexdigest()[:KEY_LENGTH]
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
    # Split on "\n" only: str.splitlines() also splits on U+2028, U+2029 and U+0085, which a
    # JSON string may hold unescaped (a shard written by another writer or version).
    mentions = sum(
        len(json.loads(line)["mentions"])
        for line in Path(merged).read_text(encoding="utf-8").split("\n")
        if line.strip()
    )
    print(f"linked {len(documents)} documents in {len(paths)} shards ({executed} run now)")
    return {"output": merged, "shards": len(paths), "executed": executed, "mentions": mentions}
