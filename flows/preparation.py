"""``ptm prepare``: raw corpus -> prepared, memory-mapped token shards, in this process.

The work of the ``prepare_corpus`` flow (:mod:`flows.prepare_corpus`), without Prefect:
the shards are built in the library's worker processes, retried on transient errors like
the flow's tasks, with the same progress lines, summary and end table.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from flows.end_table import print_end_table
from flows.execution import RETRY_DELAYS, is_transient, run_logger, with_retries
from ptm_core.data.prepare import (
    DEFAULT_SAMPLE_BYTES,
    DEFAULT_SHARD_BYTES,
    check_output_folder,
    check_preparation_settings,
    plan_shards,
    preparation_lock,
    write_manifest,
)
from ptm_core.data.prepared import PreparedCorpus
from ptm_core.data.shard_writer import ShardTask, prepare_shard, shard_worker_pool
from ptm_core.progress import Progress

#: Builds the pending shards with ``workers`` processes (0: in this process) and returns
#: their records in corpus order; every shard is attempted before the first failure in
#: corpus order is raised, so the finished ones are reused by the next run.
ShardBuilder = Callable[[Sequence[ShardTask], int], list[dict[str, Any]]]


def build_shards(pending: Sequence[ShardTask], workers: int) -> list[dict[str, Any]]:
    """The plain :data:`ShardBuilder`: the library's worker pool, one progress line per
    period, a transiently failed shard tried again after :data:`RETRY_DELAYS`."""
    log = run_logger(__name__)
    pool = shard_worker_pool(workers) if workers > 0 else contextlib.nullcontext(None)
    records: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    with pool as executor, Progress("prepare", len(pending), "shard", log=log) as progress:
        futures = [executor.submit(prepare_shard, s) for s in pending] if executor else None
        for i, shard in enumerate(pending):
            try:
                if executor is None:
                    records.append(with_retries(prepare_shard, shard))
                else:
                    assert futures is not None
                    records.append(_pooled_result(executor, shard, futures[i]))
            except Exception as exc:  # every shard is attempted; the first error is raised
                errors.append(exc)
            progress.update()
    if errors:
        raise errors[0]
    return records


def _pooled_result(
    executor: concurrent.futures.Executor,
    shard: ShardTask,
    future: concurrent.futures.Future[dict[str, Any]],
) -> dict[str, Any]:
    for delay in RETRY_DELAYS:
        try:
            return future.result()
        except Exception as exc:
            if not is_transient(exc):
                raise
            run_logger(__name__).warning(
                "shard %s failed (%s); trying again in %.0f s", shard.name, exc, delay
            )
            time.sleep(delay)
            future = executor.submit(prepare_shard, shard)
    return future.result()


def prepare_corpus_in_process(
    inputs: list[str],
    output: str,
    tokenizer: str | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    workers: int | None = None,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    text_field: str = "text",
    tokenizer_sample_bytes: int = DEFAULT_SAMPLE_BYTES,
    build: ShardBuilder = build_shards,
) -> dict[str, Any]:
    """Tokenize a corpus once into a prepared folder (``ptm_core.data.prepared``).

    Plans the shards (hashing changed inputs, making the tokenizer ready), builds the
    shards still to build, then writes the manifest. Re-running on unchanged inputs builds
    nothing; after a crash only the unfinished shards are built; a new input builds only
    its own shards. Every shard is attempted before a failure is raised (the first in
    corpus order), so the finished ones are reused by the next run.

    Args:
        inputs: Files, folders or glob patterns (txt/jsonl, .gz/.zst, Arrow, Parquet).
        output: The prepared corpus folder.
        tokenizer: A ``vocab.txt`` or tokenizer folder; ``None`` trains one.
        vocab_size: Size of a trained vocabulary.
        lowercase: Lowercase (trained tokenizer or given ``vocab.txt``).
        workers: Worker processes (``None``: one per core, none for a single shard;
            ``0``: build in this process).
        shard_bytes: Target bytes of text per shard.
        text_field: The JSONL key or Arrow/Parquet column holding the text.
        tokenizer_sample_bytes: Sentence bytes a trained tokenizer reads.
        build: How the shards are built (the flow passes Prefect tasks).

    Returns:
        ``{"output", "fingerprint", "shards", "built", "documents", "sentences", "tokens"}``;
        ``built`` counts the shards built in this run.
    """
    check_output_folder(output)  # a user's folder is never written into, whoever calls
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
            if workers is None and len(plan.pending) == 1:
                count = 0  # one shard: starting a worker would only add its start-up time
            records = build(plan.pending, count) if plan.pending else []
            write_manifest(plan, {r["name"]: r for r in records})
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
