"""The `link_entities` flow: :func:`flows.entity_linking.link_entities_in_process` with each
shard a cached, retried Prefect task (``ptm link --prefect``, ``--dask``, the demo flow).

A shard's task result is persisted and keyed on every input (Prefect's ``INPUTS`` cache
policy), so a re-run skips the shards whose inputs did not change; ``ptm link`` without
Prefect reuses the same shard files by their names instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import Task, flow, task
from prefect.cache_policies import INPUTS
from prefect.client.schemas.objects import State, TaskRun
from prefect.futures import PrefectFuture

from flows.entity_linking import link_entities_in_process, link_shard_file, merge_shard_files
from flows.execution import RETRY_DELAYS, is_transient


def retry_if_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect ``retry_condition_fn``: retry a failed task only for a transient error."""
    error = state.data
    if isinstance(error, BaseException):
        return is_transient(error)
    return True  # a failure without its exception at hand: keep Prefect's default


link_shard = task(
    name="link-shard",
    cache_policy=INPUTS,
    persist_result=True,
    retries=len(RETRY_DELAYS),
    retry_delay_seconds=list(RETRY_DELAYS),
    retry_condition_fn=retry_if_transient,
)(link_shard_file)

merge_shards = task(
    name="merge-shards",
    retries=len(RETRY_DELAYS),
    retry_delay_seconds=list(RETRY_DELAYS),
    retry_condition_fn=retry_if_transient,
)(merge_shard_files)


class TaskShards:
    """Shards run as ``link-shard`` tasks on the flow's task runner (threads, or Dask)."""

    def submit(self, arguments: tuple[Any, ...]) -> PrefectFuture[str]:
        return link_shard.submit(*arguments)

    def wait(self, handle: PrefectFuture[str]) -> None:
        handle.wait()

    def result(self, handle: PrefectFuture[str], arguments: tuple[Any, ...]) -> tuple[str, int]:
        handle.wait()
        path = handle.result()
        ran = int(handle.state.name != "Cached")
        if not Path(path).exists():  # a cached result whose file was removed: link again
            path = link_shard.with_options(refresh_cache=True)(*arguments)
            ran += 1
        return path, ran


@flow(name="link_entities", log_prints=True)
def link_entities(
    corpus: str,
    kg_dir: str,
    output: str,
    shard_size: int = 8,
    linker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Link a text corpus against a KG and write a linked corpus (JSONL), as a flow run.

    See :func:`flows.entity_linking.link_entities_in_process` for the arguments and the
    result. For many cores or a cluster run it with a Dask task runner:
    ``link_entities.with_options(task_runner=DaskTaskRunner(...))`` (``ptm link --dask``).
    """
    return link_entities_in_process(corpus, kg_dir, output, shard_size, linker, shards=TaskShards())
