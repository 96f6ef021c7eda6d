"""``ptm link``: corpus -> linked corpus, sharded, cached, resumable, streamed.

The work of the ``link_entities`` flow (:mod:`flows.link_entities`), without Prefect.

Memory does not grow with the corpus: documents are read as a stream, at most
``IN_FLIGHT`` shards are submitted at once, and finished shards are appended in order to
the output's temporary file, which replaces the output when every shard is in.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import errno
import functools
import hashlib
import itertools
import json
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, TextIO

from flows.end_table import print_end_table
from flows.execution import run_logger, with_retries
from ptm_core.atomic import DiskFullError, file_in_the_way
from ptm_core.data import iter_text_corpus
from ptm_core.progress import Progress
from ptm_knowledge.kg_corpus_settings import LinkerSettings

Shard = list[tuple[str, list[str]]]  # (doc_id, sentences)

# Shard files are named by the first KEY_LENGTH hex digits of their inputs' hash.
KEY_LENGTH = 20
# Shards submitted and not yet merged: bounds memory, keeps the task runner's workers busy.
IN_FLIGHT = 32
_COPY_BLOCK = 4 * 2**20


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


def check_output_file(output: str | Path) -> None:
    """Refuse an ``--output`` that cannot become the linked corpus file, before any work.

    Raises:
        ValueError: ``output`` is a folder, or a file stands where a folder above it must be.
    """
    path = Path(output)
    if path.is_dir():
        raise ValueError(
            f"--output {path} is a folder; it names the linked corpus file to write, e.g. "
            f"--output {path / 'linked.jsonl'}"
        )
    blocker = file_in_the_way(path.parent)
    if blocker is not None:
        raise ValueError(
            f"--output {path}: {blocker} is a file, so no folder can hold the output there; "
            "give another path"
        )


def fingerprint_files(*paths: str | Path) -> str:
    """SHA-256 of the given files' bytes (the KG's identity for the cache key), read in
    blocks so a multi-GB KG is never held in memory."""
    digest = hashlib.sha256()
    for path in paths:
        with Path(path).open("rb") as handle:
            while block := handle.read(_COPY_BLOCK):
                digest.update(block)
    return digest.hexdigest()


def kg_cache_dir() -> Path:
    """Where loaded KGs are cached: ``$PTM_CACHE_DIR/kg`` or ``~/.cache/ptm/kg``."""
    root = os.environ.get("PTM_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "ptm") / "kg"


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


def _prior_files(settings: dict[str, Any]) -> list[Path]:
    """The noun-share prior file the linker settings name (none when it is off)."""
    from ptm_knowledge.linking.noun_share import BUILTIN_PRIORS

    prior = settings.get("pos_prior")
    if prior is None or settings.get("guard") == "none":
        return []
    path = BUILTIN_PRIORS.get(str(prior), Path(str(prior)))
    return [path] if path.is_file() else []  # a missing file fails in the linker, named


# The fingerprint is part of the key so a KG edited in place is reloaded in a long-lived
# process (a Dask worker, a test session) rather than served from this cache.
@functools.lru_cache(maxsize=4)
def _linker(kg_dir: str, kg_fingerprint: str, config_json: str) -> Any:
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    kg = load_knowledge_graph(kg_dir, cache_dir=kg_cache_dir())
    return EntityLinker(kg, **json.loads(config_json))


def link_shard_file(
    index: int, shard: Shard, source: str, kg_dir: str, kg_fingerprint: str, linker: dict, out: str
) -> str:
    """Link one shard and write it to ``out`` (atomically); returns ``out``."""
    from ptm_knowledge.linking import link_documents, write_linked_corpus

    try:
        settings = json.dumps(linker, sort_keys=True)
        linked = link_documents(shard, _linker(kg_dir, kg_fingerprint, settings))
        write_linked_corpus(linked, out)
    except DiskFullError:
        raise  # names the file and the fix already; the shard adds nothing
    except Exception as exc:
        raise RuntimeError(
            f"shard {index} (documents from {source}) failed: {type(exc).__name__}: {exc}"
        ) from exc
    return out


class ShardMerger:
    """Appends linked shards, in order, to a temporary file that replaces ``output`` on
    :meth:`commit` (atomic: a reader sees the old output or the whole new one).

    Each shard is copied in blocks and its records are counted as they pass, so neither a
    shard nor the output is ever held in memory. Records are split on ``"\\n"`` only:
    ``str.splitlines()`` also splits on U+2028, U+2029 and U+0085, which a JSON string may
    hold unescaped (a shard written by another writer or version).
    """

    def __init__(self, output: str | Path) -> None:
        from ptm_knowledge.linking.corpus import atomic_text_writer

        self._context = atomic_text_writer(output)
        self._handle: TextIO = self._context.__enter__()
        self.output = Path(output)
        self.documents = 0
        self.mentions = 0

    def add(self, shard: str | Path) -> None:
        with Path(shard).open(encoding="utf-8", newline="") as source:
            for line in _records(source):
                self._handle.write(line)
                self.documents += 1
                self.mentions += len(json.loads(line)["mentions"])

    def commit(self) -> Path:
        self._context.__exit__(None, None, None)
        return self.output

    def abort(self, exc: BaseException) -> BaseException:
        """Remove the temporary file; ``output`` stays as it was.

        Returns:
            The error to raise: ``exc``, or a :class:`DiskFullError` when ``exc`` was a
            full disk.
        """
        try:
            self._context.__exit__(type(exc), exc, exc.__traceback__)
        except DiskFullError as full:
            return full
        except BaseException:  # exc itself, re-raised by atomic_file: the caller raises it
            pass
        return exc


def _records(source: TextIO) -> Iterator[str]:
    """``"\\n"``-terminated non-blank records of a JSONL stream (a last one gets its
    ``"\\n"``), read a block at a time."""
    rest = ""
    while block := source.read(_COPY_BLOCK):
        lines = (rest + block).split("\n")
        rest = lines.pop()
        for line in lines:
            if line.strip():
                yield line + "\n"
    if rest.strip():
        yield rest + "\n"


def merge_shard_files(paths: list[str], output: str) -> str:
    """Concatenate linked shards into one linked corpus, streaming and atomically."""
    merger = ShardMerger(output)
    try:
        for path in paths:
            merger.add(path)
    except BaseException as exc:
        error = merger.abort(exc)
        if error is exc:
            raise
        raise error from exc
    return str(merger.commit())


def _shards(documents: Iterable[Any], shard_size: int) -> Iterator[list[Any]]:
    iterator = iter(documents)
    while shard := list(itertools.islice(iterator, shard_size)):
        yield shard


class ShardRunner(Protocol):
    """How :func:`link_entities_in_process` runs its ``link-shard`` steps: Prefect tasks
    inside the flow (``flows.link_entities``), threads of this process otherwise."""

    def submit(self, arguments: tuple[Any, ...]) -> Any:
        """Start linking one shard (the arguments of :func:`link_shard_file`)."""

    def wait(self, handle: Any) -> None:
        """Wait for a started shard, successful or not."""

    def result(self, handle: Any, arguments: tuple[Any, ...]) -> tuple[str, int]:
        """The shard's file, and how many times it was linked now (0: reused)."""


class ThreadShards:
    """Shards linked in this process's threads, retried on transient errors.

    A shard file already on disk is reused: its name is the hash of every input (the
    shard's documents, the KG fingerprint, the linker settings) and it is written
    atomically, so it exists only when complete and current.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers or min(IN_FLIGHT, os.cpu_count() or 1),
            thread_name_prefix="link-shard",
        )

    def submit(self, arguments: tuple[Any, ...]) -> concurrent.futures.Future[tuple[str, int]]:
        return self.pool.submit(_link_or_reuse, arguments)

    def wait(self, handle: concurrent.futures.Future[tuple[str, int]]) -> None:
        concurrent.futures.wait([handle])

    def result(
        self, handle: concurrent.futures.Future[tuple[str, int]], arguments: tuple[Any, ...]
    ) -> tuple[str, int]:
        return handle.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True)


def _link_or_reuse(arguments: tuple[Any, ...]) -> tuple[str, int]:
    out = arguments[-1]
    if Path(out).is_file():
        return out, 0
    return with_retries(link_shard_file, *arguments), 1


def link_entities_in_process(
    corpus: str,
    kg_dir: str,
    output: str,
    shard_size: int = 8,
    linker: dict[str, Any] | None = None,
    shards: ShardRunner | None = None,
) -> dict[str, Any]:
    """Link a text corpus against a KG and write a linked corpus (JSONL): ``ptm link``.

    The corpus is validated first in one streaming pass (a bad line fails here, naming
    file and line, before any linking), then read again as a stream, cut into shards of
    ``shard_size`` documents run as ``link-shard`` steps (at most ``IN_FLIGHT`` at
    once), and the shards are appended in order to the output, which is replaced
    atomically at the end. Shard files are kept beside the output, named by the hash of
    their inputs: re-running after a crash, or with a grown corpus, only links the shards
    that are new or changed. The KG is loaded once per process and cached on disk by its
    fingerprint (``$PTM_CACHE_DIR/kg``). The ``link_entities`` flow runs this with
    Prefect tasks (``ptm link --prefect``, or ``--dask`` for a Dask cluster).

    Args:
        corpus: text-corpus file(s) or directory (``data_specs/text_corpus``).
        kg_dir: directory with ``entities.tsv`` (+ ``triples.tsv``).
        output: the linked corpus to write (``data_specs/linked_corpus``).
        shard_size: documents per shard.
        linker: :class:`ptm_knowledge.linking.EntityLinker` keyword settings
            (``case``, ``threshold``, ``guard``, ...); unset ones take
            :class:`~ptm_knowledge.kg_corpus_settings.LinkerSettings`' defaults.
        shards: how shards run (default: :class:`ThreadShards`).

    Returns:
        ``{"output", "shards", "executed", "mentions"}``; ``executed`` counts the shards
        linked in this run (the rest were reused).
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be >= 1, got {shard_size}")
    check_output_file(output)
    documents = sum(1 for _ in iter_text_corpus(corpus))  # validates, holds nothing
    kg_path = Path(kg_dir)
    # Every setting made explicit, so a changed default is a changed cache key.
    settings = {**dataclasses.asdict(LinkerSettings()), **(linker or {})}
    # The noun-share prior file is an input like the KG: an edited one relinks every shard.
    kg_fingerprint = fingerprint_files(*_kg_files(kg_path), *_prior_files(settings))
    linker_key = (str(kg_path), kg_fingerprint, json.dumps(settings, sort_keys=True))
    loaded = False
    output_path = Path(output).resolve()
    shard_dir = output_path.parent / f".{output_path.name}.shards"
    # Temporary files of a killed run: never read (names start with "."), but they pile up.
    remove_stale_temp_files(shard_dir, rf"[0-9a-f]{{{KEY_LENGTH}}}\.jsonl")
    remove_stale_temp_files(output_path.parent, re.escape(output_path.name))

    own = shards is None
    runner: ShardRunner = ThreadShards() if shards is None else shards
    executed = count = 0
    merger = ShardMerger(output)
    pending: deque[tuple[tuple[Any, ...], Any]] = deque()
    progress = Progress("link", documents, "document", log=run_logger(__name__))

    def merge_oldest() -> None:
        nonlocal executed
        arguments, handle = pending.popleft()
        path, ran = runner.result(handle, arguments)
        executed += ran
        merger.add(path)
        progress.update(len(arguments[1]))

    try:
        for index, docs in enumerate(_shards(iter_text_corpus(corpus), shard_size)):
            shard: Shard = [(d.doc_id, list(d.sentences)) for d in docs]
            key = hashlib.sha256(
                json.dumps([shard, kg_fingerprint, settings], sort_keys=True).encode()
            ).hexdigest()[:KEY_LENGTH]
            out = str(shard_dir / f"{key}.jsonl")
            if not loaded and not Path(out).is_file():
                # Load and validate the KG (and the linker settings) once, before the first
                # shard to link: a data error fails with its file and line instead of
                # failing, and being retried, in every shard; shards in this process's
                # threads reuse this linker (_linker is cached). A re-run whose shards are
                # all on disk never loads it (spaCy's import alone takes seconds).
                _linker(*linker_key)
                loaded = True
            arguments = (index, shard, docs[0].source, str(kg_path), kg_fingerprint, settings, out)
            pending.append((arguments, runner.submit(arguments)))
            count += 1
            while len(pending) >= IN_FLIGHT:
                merge_oldest()
        while pending:
            merge_oldest()
    except BaseException as exc:
        for _, handle in pending:  # let running shards finish writing their own files
            with contextlib.suppress(BaseException):
                runner.wait(handle)
        progress.close()
        error = merger.abort(exc)
        if error is exc:
            raise
        raise error from exc
    finally:
        if own:
            runner.close()  # type: ignore[attr-defined]
    progress.close()
    merged = merger.commit()
    print(f"linked {documents} documents in {count} shards ({executed} run now)")
    print_end_table(
        "link",
        {
            "documents": documents,
            "mentions": merger.mentions,
            "shards": count,
            "shards linked now": executed,
        },
        {"linked corpus": merged},
    )
    return {
        "output": str(merged),
        "shards": count,
        "executed": executed,
        "mentions": merger.mentions,
    }
