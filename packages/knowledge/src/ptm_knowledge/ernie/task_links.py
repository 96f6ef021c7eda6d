"""ERNIE-THU fine-tuning, linking: a task file's mentions, linked once and cached.

:func:`task_links` links a task file with the entity linker and caches the mentions in
``<cache_dir>/task-links/`` under a key of the file's bytes, the KG files' bytes and the
linker settings, so no epoch, run or seed links it again; :class:`LinkedRows` pairs the
task's rows with their mentions.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text
from ptm_core.finetune.data.examples import SentenceExample

LINKS_FORMAT = "ptm-task-links/1"
# One mention as cached: character span in its segment and the entity id.
Span = tuple[int, int, str]


def default_links_dir() -> Path:
    """``$PTM_CACHE_DIR/task-links`` or ``~/.cache/ptm/task-links``."""
    root = os.environ.get("PTM_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "ptm") / "task-links"


def _kg_files(kg: str | Path) -> list[Path]:
    kg = Path(kg)
    if kg.is_dir():
        return [p for p in (kg / "entities.tsv", kg / "triples.tsv") if p.is_file()]
    return [kg]


def links_key(path: str | Path, kg: str | Path, linker_options: Mapping[str, Any]) -> str:
    """SHA-256 of the task file's bytes, the KG files' bytes and the linker settings."""
    digest = hashlib.sha256(LINKS_FORMAT.encode())
    for file in [Path(path), *_kg_files(kg)]:
        digest.update(b"\x00" + file.name.encode() + b"\x00" + file.read_bytes())
    digest.update(json.dumps(dict(linker_options), sort_keys=True).encode())
    return digest.hexdigest()


def task_links(
    path: str | Path,
    examples: Sequence[SentenceExample],
    kg: str | Path,
    *,
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
) -> list[tuple[list[Span], list[Span]]]:
    """The linked mentions of every example of a task file, linked once and cached.

    Each example's ``text`` and ``pair`` are linked separately with an
    :class:`~ptm_knowledge.linking.EntityLinker` over ``kg``; the result is written
    atomically to ``<cache_dir>/links-<key>.jsonl`` (one line per example) and read back by
    every later call with the same file, KG and settings.

    Args:
        path: the task file ``examples`` were read from (its bytes key the cache).
        examples: its examples (:func:`~ptm_core.finetune.data.read_glue`).
        kg: the KG folder (``entities.tsv`` + ``triples.tsv``) the linker matches against.
        linker_options: :class:`EntityLinker` keyword arguments (``threshold``, ...).
        cache_dir: the cache folder (default :func:`default_links_dir`).

    Returns:
        Per example, ``(text mentions, pair mentions)`` as ``(start, end, entity_id)``.
    """
    options = dict(linker_options or {})
    if not Path(kg).exists():
        raise FileNotFoundError(
            f"kg={kg}: not found; give the KG folder (entities.tsv + triples.tsv) the "
            "ERNIE-THU model was pre-trained with"
        )
    cache = Path(cache_dir) if cache_dir is not None else default_links_dir()
    target = cache / f"links-{links_key(path, kg, options)[:32]}.jsonl"
    if target.is_file():
        rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
        if len(rows) == len(examples):
            return [([_span(m) for m in a], [_span(m) for m in b]) for a, b in rows]
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.linking import EntityLinker

    linker = EntityLinker(load_knowledge_graph(kg), **options)
    texts = [e.text for e in examples]
    pairs = [e.pair or "" for e in examples]
    linked = []
    for a, b in zip(linker.link_batch(texts), linker.link_batch(pairs), strict=True):
        linked.append(
            ([(m.start, m.end, m.entity_id) for m in a], [(m.start, m.end, m.entity_id) for m in b])
        )
    cache.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, "".join(json.dumps([a, b]) + "\n" for a, b in linked))
    return linked


def _span(item: list[Any]) -> Span:
    start, end, entity = item
    return int(start), int(end), str(entity)


@dataclass(frozen=True)
class LinkedExample:
    """A task example and its linked mentions (character spans in ``text`` / ``pair``)."""

    example: SentenceExample
    mentions: tuple[Span, ...]
    pair_mentions: tuple[Span, ...] = ()


class LinkedRows(Sequence[LinkedExample]):
    """``examples[i]`` paired with ``links[i]``, built when indexed (the reader stays lazy)."""

    def __init__(
        self, examples: Sequence[SentenceExample], links: Sequence[tuple[list[Span], list[Span]]]
    ) -> None:
        if len(examples) != len(links):
            raise ValueError(f"{len(examples)} examples but {len(links)} linked rows")
        self.examples = examples
        self.links = links

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        a, b = self.links[index]
        return LinkedExample(self.examples[index], tuple(a), tuple(b))

    def __iter__(self) -> Iterator[LinkedExample]:
        return (self[i] for i in range(len(self)))


def link_coverage(rows: Sequence[LinkedExample], entity_index: Mapping[str, int]) -> dict[str, Any]:
    """How much of a task the linker reached: rows with a mention whose entity has an
    embedding, mentions in all, and mentions of entities outside the table."""
    with_entity = mentions = unknown = 0
    for row in rows:
        spans = [*row.mentions, *row.pair_mentions]
        mentions += len(spans)
        unknown += sum(entity not in entity_index for *_, entity in spans)
        with_entity += any(entity in entity_index for *_, entity in spans)
    return {
        "rows": len(rows),
        "rows_with_entity": with_entity,
        "mentions": mentions,
        "mentions_outside_table": unknown,
    }


__all__ = [
    "LINKS_FORMAT",
    "LinkedExample",
    "LinkedRows",
    "Span",
    "default_links_dir",
    "link_coverage",
    "links_key",
    "task_links",
]
