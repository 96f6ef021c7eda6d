"""The `prepare_corpus` flow: :func:`flows.preparation.prepare_corpus_in_process` with each
shard a retried Prefect task (``ptm prepare --prefect``, ``--dask``)."""

from __future__ import annotations

import concurrent.futures
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from prefect import flow, task

from flows.execution import RETRY_DELAYS
from flows.link_entities import retry_if_transient
from flows.preparation import prepare_corpus_in_process
from ptm_core.data.prepare import DEFAULT_SAMPLE_BYTES, DEFAULT_SHARD_BYTES
from ptm_core.data.shard_writer import ShardTask, prepare_shard, shard_worker_pool
from ptm_core.progress import Progress

# The library's worker processes while a flow runs with `workers` (one flow per process
# at a time). None on a Dask worker: there the task builds its shard itself.
_POOL: concurrent.futures.ProcessPoolExecutor | None = None


@task(
    name="prepare-shard",
    retries=len(RETRY_DELAYS),
    retry_delay_seconds=list(RETRY_DELAYS),
    retry_condition_fn=retry_if_transient,
)
def prepare_shard_task(shard: ShardTask) -> dict[str, Any]:
    """Write one shard (atomically) and return its record; retried on I/O errors only.

    A bad line is a ``CorpusError`` (a ``ValueError``): it fails at once, with its file and
    line, and is never retried.
    """
    if _POOL is not None:
        return _POOL.submit(prepare_shard, shard).result()
    return prepare_shard(shard)


@contextlib.contextmanager
def _worker_pool(workers: int) -> Iterator[None]:
    """Worker processes that load the tokenizer once each, for the tasks of this flow run."""
    global _POOL
    with shard_worker_pool(workers) as pool:
        _POOL = pool
        try:
            yield
        finally:
            _POOL = None


def build_with_tasks(pending: Sequence[ShardTask], workers: int) -> list[dict[str, Any]]:
    """Map ``prepare-shard`` over the pending shards on the flow's task runner: in
    ``workers`` processes of the library's pool with the default runner, on the Dask
    workers with a Dask runner (``workers`` is then 0)."""
    from prefect import get_run_logger

    pool = _worker_pool(workers) if workers > 0 else contextlib.nullcontext()
    with pool, Progress("prepare", len(pending), "shard", log=get_run_logger()) as progress:
        futures = prepare_shard_task.map(list(pending))
        for future in futures:  # in corpus order: the count may lag a little
            future.wait()
            progress.update()
    failed = [f for f in futures if f.state.is_failed() or f.state.is_crashed()]
    if failed:
        failed[0].result()  # raises the first failure in corpus order
    return [f.result() for f in futures]


@flow(name="prepare_corpus", log_prints=True)
def prepare_corpus(
    inputs: list[str],
    output: str,
    tokenizer: str | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    workers: int | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    text_field: str = "text",
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
) -> dict[str, Any]:
    """Tokenize a corpus once into a prepared folder, as a flow run.

    See :func:`flows.preparation.prepare_corpus_in_process` for the arguments and the
    result. With a Dask runner (``ptm prepare --dask``, ``workers=0``) each task builds its
    shard on a Dask worker.
    """
    return prepare_corpus_in_process(
        inputs,
        output,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        workers=workers,
        shard_bytes=shard_bytes,
        text_field=text_field,
        tokenizer_sample_bytes=tokenizer_sample_bytes,
        build=build_with_tasks,
    )
