"""The `prepare_corpus` flow: raw corpus -> prepared, memory-mapped token shards (`ptm prepare`)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from collections.abc import Iterator
from typing import Any

from prefect import flow, get_run_logger, task

from flows.end_table import print_end_table
from flows.link_entities import retry_if_transient
from ptm_core.data.prepare import (
    DEFAULT_SAMPLE_BYTES,
    DEFAULT_SHARD_BYTES,
    check_preparation_settings,
    plan_shards,
    preparation_lock,
    prepare_shard,
    write_manifest,
)
from ptm_core.data.prepared import PreparedCorpus
from ptm_core.data.shard_writer import ShardTask, shard_worker_pool
from ptm_core.progress import Progress

# The library's worker processes while a flow runs with `workers` (one flow per process
# at a time). None on a Dask worker: there the task builds its shard itself.
_POOL: concurrent.futures.ProcessPoolExecutor | None = None


@task(
    name="prepare-shard",
    retries=2,
    retry_delay_seconds=[1, 5],
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
    """Tokenize a corpus once into a prepared folder (``ptm_core.data.prepared``).

    Plans the shards (hashing changed inputs, making the tokenizer ready), maps
    ``prepare-shard`` over the shards still to build, then writes the manifest. Re-running
    on unchanged inputs builds nothing; after a crash only the unfinished shards are built;
    a new input builds only its own shards. Every shard is attempted before a failure is
    raised (the first in corpus order), so the finished ones are reused by the next run.

    With the default task runner the shards are built in ``workers`` processes of the
    library's own pool (``None``: one per core), each loading the tokenizer once; with a
    Dask runner (``ptm prepare --dask``) each task builds its shard on a Dask worker.

    Args:
        inputs: Files, folders or glob patterns (txt/jsonl, .gz/.zst, Arrow, Parquet).
        output: The prepared corpus folder.
        tokenizer: A ``vocab.txt`` or tokenizer folder; ``None`` trains one.
        vocab_size: Size of a trained vocabulary.
        lowercase: Lowercase (trained tokenizer or given ``vocab.txt``).
        workers: Worker processes (``None``: one per core; ``0``: build in the task's thread).
        shard_bytes: Target bytes of text per shard.
        text_field: The JSONL key or Arrow/Parquet column holding the text.
        tokenizer_sample_bytes: Sentence bytes a trained tokenizer reads.

    Returns:
        ``{"output", "fingerprint", "shards", "built", "documents", "sentences", "tokens"}``;
        ``built`` counts the shards built in this run.
    """
    check_preparation_settings(
        vocab_size=vocab_size,
        workers=workers,
        shard_bytes=shard_bytes,
        tokenizer_sample_bytes=tokenizer_sample_bytes,
    )
    with preparation_lock(output):
        plan = plan_shards(
            inputs,
            output,
            tokenizer=tokenizer,
            vocab_size=vocab_size,
            lowercase=lowercase,
            shard_bytes=shard_bytes,
            text_field=text_field,
            tokenizer_sample_bytes=tokenizer_sample_bytes,
        )
        if not plan.up_to_date:
            count = workers if workers is not None else (os.cpu_count() or 1)
            pool = _worker_pool(count) if count > 0 and plan.pending else contextlib.nullcontext()
            with (
                pool,
                Progress("prepare", len(plan.pending), "shard", log=get_run_logger()) as progress,
            ):
                futures = prepare_shard_task.map(plan.pending)
                for future in futures:  # in corpus order: the count may lag a little
                    future.wait()
                    progress.update()
            failed = [f for f in futures if f.state.is_failed() or f.state.is_crashed()]
            if failed:
                failed[0].result()  # raises the first failure in corpus order
            write_manifest(plan, {r["name"]: r for r in (f.result() for f in futures)})
    store = PreparedCorpus.open(output, verify=False)
    built = 0 if plan.up_to_date else len(plan.pending)
    print(
        f"prepared {store.num_documents} documents, {store.num_sentences} sentences, "
        f"{store.num_tokens} tokens in {store.num_shards} shards ({built} built now) "
        f"at {output}"
    )
    print_end_table(
        "prepare",
        {
            "documents": store.num_documents,
            "sentences": store.num_sentences,
            "tokens": store.num_tokens,
            "shards": store.num_shards,
            "shards built now": built,
        },
        {"prepared corpus": output},
    )
    return {
        "output": str(output),
        "fingerprint": store.fingerprint,
        "shards": store.num_shards,
        "built": built,
        "documents": store.num_documents,
        "sentences": store.num_sentences,
        "tokens": store.num_tokens,
    }
