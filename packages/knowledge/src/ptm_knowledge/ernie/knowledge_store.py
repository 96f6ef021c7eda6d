"""ERNIE rows built per index from a prepared linked corpus (memory-mapped).

:class:`KnowledgeStore` opens what :func:`~ptm_knowledge.ernie.prepared.
prepare_linked_corpus` wrote: core's :class:`~ptm_core.data.prepared.PreparedCorpus` (the
token store the layouts plan over) plus the unit columns and mention tables of each shard.
:class:`KnowledgeRows` takes core's planned rows (single segments or NSP pairs, planned
once and cached beside the corpus) and adds, when a row is asked for, the same
annotations :func:`~ptm_knowledge.ernie.examples.build_knowledge_examples` builds in
memory: ``phrase_units`` / ``entity_units`` (row-local unit ids; a unit not wholly in the
row is dropped) and ``entity_ids`` (the entity's embedding row on the first piece of each
mention). Nothing per row or per token is held in memory.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ptm_core.data.layouts import LazyRows
from ptm_core.data.prepared import PreparedCorpus, PreparedDataError, shard_file
from ptm_knowledge.ernie.examples import MentionCoverage
from ptm_knowledge.ernie.linked_shards import ERNIE_FILES, MENTION_DTYPE, UNIT_DTYPE
from ptm_knowledge.ernie.prepared import ERNIE_FORMAT, REBUILD, verify_ernie_shards
from ptm_knowledge.linking.alignment import NO_ENTITY
from ptm_knowledge.linking.corpus import LinkedCorpusError

UNIT_KEYS = ("phrase_units", "entity_units")
_OPEN_SHARDS = 64


class KnowledgeStore:
    """A prepared linked corpus: a :class:`~ptm_core.data.token_store.TokenStore` plus
    per-token unit ids and per-shard mention tables.

    Attributes:
        corpus: core's reader (tokens, sentence and document offsets, plan cache).
    """

    def __init__(self, corpus: PreparedCorpus) -> None:
        self.corpus = corpus
        kept = [s for s in corpus.manifest["shards"] if s["tokens"] > 0]
        self.shards = kept
        self._bases = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum([s["tokens"] for s in kept], out=self._bases[1:])
        self._open: OrderedDict[int, dict[str, np.ndarray]] = OrderedDict()
        self._lookup: list[np.ndarray] | None = None

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, verify: bool = True) -> KnowledgeStore:
        """Open a folder written by :func:`prepare_linked_corpus`.

        Raises:
            PreparedDataError: not an ERNIE-prepared folder, or (``verify``) a shard file
                whose SHA-256 does not match the manifest, naming the file and the fix.
        """
        corpus = PreparedCorpus.open(directory, verify=False)
        block = corpus.manifest.get("ernie")
        if not isinstance(block, dict) or block.get("format") != ERNIE_FORMAT:
            raise PreparedDataError(
                corpus.directory / "manifest.json",
                None,
                "ernie",
                f"not a linked corpus prepared for ERNIE (format {ERNIE_FORMAT!r})",
                "prepare it with ptm_knowledge.ernie.prepare_linked_corpus (a folder from "
                "`ptm prepare` holds plain text, without entities)",
            )
        if verify:
            errors = verify_ernie_shards(corpus.directory, corpus.manifest["shards"])
            if errors:
                raise errors[0]
        else:
            for shard in corpus.manifest["shards"]:
                for kind in ERNIE_FILES:
                    if not shard_file(corpus.directory, shard["name"], kind).is_file():
                        path = shard_file(corpus.directory, shard["name"], kind)
                        raise PreparedDataError(
                            path, None, "path", "shard file is missing", REBUILD
                        )
        return cls(corpus)

    # ------------------------------------------------------------------ TokenStore

    @property
    def num_documents(self) -> int:
        return self.corpus.num_documents

    @property
    def num_tokens(self) -> int:
        return self.corpus.num_tokens

    def sentence_offsets(self, document: int) -> np.ndarray:
        return self.corpus.sentence_offsets(document)

    def document_offsets(self) -> Iterator[np.ndarray]:
        return self.corpus.document_offsets()

    def tokens(self, start: int, stop: int) -> np.ndarray:
        return self.corpus.tokens(start, stop)

    def sentence_starts(self, start: int, stop: int) -> np.ndarray:
        return self.corpus.sentence_starts(start, stop)

    @property
    def fingerprint(self) -> str:
        return self.corpus.fingerprint

    @property
    def cache_dir(self) -> Path:
        return self.corpus.cache_dir

    @property
    def tokenizer_dir(self) -> Path:
        return self.corpus.tokenizer_dir

    # ------------------------------------------------------------------ entities

    def entity_tables(self) -> Iterator[dict[str, Any]]:
        """Each non-empty shard's entity list: ``ids``, first ``lines``, mention ``counts``."""
        for shard in self.shards:
            path = shard_file(self.corpus.directory, shard["name"], "entities.json")
            yield json.loads(path.read_text(encoding="utf-8"))

    def source_path(self, index: int) -> str:
        """The input file shard ``index`` was prepared from."""
        return str(self.shards[index]["source"]["path"])

    def bind_entities(self, entity_index: Mapping[str, int] | None, *, known: Any = None) -> None:
        """Map every shard's entities to rows of the entity embedding table.

        Args:
            entity_index: entity id -> embedding row (``None``: no entities, all ``-1``);
                mentions of ids outside it are left out of ``entity_ids``, as
                :func:`~ptm_knowledge.linking.align_mentions_to_pieces` does.
            known: a container of valid entity ids (the KG's): an id outside it is an
                error naming the input file and the line of its first mention.

        Raises:
            LinkedCorpusError: an entity id outside ``known``.
        """
        lookups = []
        for index, table in enumerate(self.entity_tables()):
            if known is not None:
                for entity, line in zip(table["ids"], table["lines"], strict=True):
                    if entity not in known:
                        raise LinkedCorpusError(
                            self.source_path(index),
                            line,
                            "mentions[].entity",
                            f"unknown entity id {entity!r} (not in the knowledge graph)",
                            "link the corpus against this KG (ptm link --kg <kg>), or use the "
                            "KG it was linked with",
                        )
            mapping = entity_index or {}
            lookups.append(
                np.asarray([mapping.get(e, NO_ENTITY) for e in table["ids"]], dtype=np.int64)
            )
        self._lookup = lookups

    # ------------------------------------------------------------------ columns

    def _shard(self, index: int) -> dict[str, np.ndarray]:
        arrays = self._open.get(index)
        if arrays is not None:
            self._open.move_to_end(index)
            return arrays
        name = self.shards[index]["name"]
        directory = self.corpus.directory
        arrays = {
            key: np.memmap(shard_file(directory, name, key), UNIT_DTYPE, mode="r")
            for key in UNIT_KEYS
        }
        mentions = shard_file(directory, name, "mentions")
        arrays["mentions"] = (
            np.memmap(mentions, MENTION_DTYPE, mode="r").reshape(-1, 2)
            if mentions.stat().st_size
            else np.zeros((0, 2), dtype=MENTION_DTYPE)
        )
        self._open[index] = arrays
        if len(self._open) > _OPEN_SHARDS:
            self._open.popitem(last=False)
        return arrays

    def locate(self, start: int) -> tuple[int, int]:
        """``(shard index, local offset)`` of global token ``start``."""
        index = int(np.searchsorted(self._bases, start, side="right")) - 1
        index = min(index, len(self.shards) - 1)
        return index, start - int(self._bases[index])

    def span_entities(self, start: int, length: int) -> list[int]:
        """``entity_ids`` of tokens ``[start, start + length)`` (one document)."""
        out = [NO_ENTITY] * length
        if self._lookup is None or not length:
            return out
        shard, local = self.locate(start)
        mentions = self._shard(shard)["mentions"]
        lookup = self._lookup[shard]
        lo = int(np.searchsorted(mentions[:, 0], local, side="left"))
        hi = int(np.searchsorted(mentions[:, 0], local + length, side="left"))
        for position, entity in mentions[lo:hi].tolist():
            row = int(lookup[entity])
            if row != NO_ENTITY:
                out[position - local] = row
        return out

    def span_units(self, key: str, start: int, length: int) -> list[tuple[Any, int, int]]:
        """Unit runs of tokens ``[start, start + length)``: ``(unit, run length, unit size)``
        per position (``(None, 0, 0)`` outside units). A unit is identified by its shard and
        local id, and its size is read around the span where it may go on."""
        if not length:
            return []
        shard, local = self.locate(start)
        column = self._shard(shard)[key]
        values = column[local : local + length].tolist()
        out: list[tuple[Any, int, int]] = []
        i = 0
        while i < length:
            unit = values[i]
            j = i
            while j + 1 < length and values[j + 1] == unit:
                j += 1
            run = j - i + 1
            if unit == -1:
                out.extend([(None, 0, 0)] * run)
            else:
                size = run
                if i == 0:
                    size += _extent(column, local - 1, -1, unit)
                if j == length - 1:
                    size += _extent(column, local + length, 1, unit)
                out.extend([((shard, unit), run, size)] * run)
            i = j + 1
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_open"] = OrderedDict()  # maps are per process
        return state


def _extent(column: np.ndarray, position: int, step: int, unit: int) -> int:
    """Tokens of ``unit`` from ``position`` on in direction ``step`` (units are contiguous)."""
    n = 0
    while 0 <= position < len(column) and int(column[position]) == unit:
        n += 1
        position += step
    return n


class KnowledgeRows(LazyRows):
    """Core's planned rows with ERNIE's annotations added per index.

    Args:
        rows: ``SegmentRows`` or ``SegmentPairRows`` over ``store`` (their ``plan``
            gives the spans).
        store: the prepared linked corpus (entities bound when ``entity_ids`` matter).
    """

    def __init__(self, rows: Any, store: KnowledgeStore) -> None:
        self.rows = rows
        self.store = store
        plan = rows.plan
        self.pairs = plan.ndim == 2 and plan.shape[1] > 2

    def __len__(self) -> int:
        return len(self.rows)

    def lengths(self) -> np.ndarray:
        return np.asarray(self.rows.lengths(), dtype=np.int64)

    def spans(self, index: int) -> list[tuple[int, int]]:
        """``(start, length)`` of the row's segments, in row order."""
        plan = self.rows.plan[index]
        if self.pairs:
            return [(int(plan[0]), int(plan[1])), (int(plan[2]), int(plan[3]))]
        return [(int(plan[0]), int(plan[1]))]

    def _build(self, index: int) -> dict[str, Any]:
        example = dict(self.rows[index])
        segments = self.spans(index)
        entities: list[int] = [NO_ENTITY]
        for start, length in segments:
            entities.extend(self.store.span_entities(start, length))
            entities.append(NO_ENTITY)
        for key in UNIT_KEYS:
            runs: list[tuple[Any, int, int]] = [(None, 0, 0)]
            for start, length in segments:
                runs.extend(self.store.span_units(key, start, length))
                runs.append((None, 0, 0))
            example[key] = _whole_units(runs)
        example["entity_ids"] = entities
        return example


def _whole_units(runs: Sequence[tuple[Any, int, int]]) -> list[int]:
    """Row-local unit ids, numbered by first appearance; units not wholly in the row -1."""
    present: dict[Any, int] = {}
    size: dict[Any, int] = {}
    for unit, _, total in runs:
        if unit is not None:
            present[unit] = present.get(unit, 0) + 1
            size[unit] = total
    local = {u: i for i, u in enumerate(u for u in present if present[u] == size[u])}
    return [local.get(unit, -1) if unit is not None else -1 for unit, _, _ in runs]


def knowledge_coverage(
    store: KnowledgeStore, entity_index: Mapping[str, int], rows: KnowledgeRows
) -> MentionCoverage:
    """:class:`MentionCoverage` of a prepared corpus, shard by shard.

    ``in_rows`` counts the aligned pieces inside at least one row's spans (the union of
    the plan's spans, merged once).
    """
    mentions = known = aligned = in_rows = 0
    intervals = _merged_spans(rows)
    for index, table in enumerate(store.entity_tables()):
        counts = np.asarray(table["counts"], dtype=np.int64)
        has_row = np.asarray([e in entity_index for e in table["ids"]], dtype=bool)
        mentions += int(counts.sum())
        known += int(counts[has_row].sum()) if len(counts) else 0
        shard_mentions = store._shard(index)["mentions"]
        if not len(shard_mentions):
            continue
        keep = has_row[shard_mentions[:, 1]]
        positions = np.unique(np.asarray(shard_mentions[keep, 0])) + store._bases[index]
        aligned += len(positions)
        if len(intervals):
            slot = np.searchsorted(intervals[:, 0], positions, side="right") - 1
            inside = (slot >= 0) & (positions < intervals[np.maximum(slot, 0), 1])
            in_rows += int(inside.sum())
    return MentionCoverage(mentions=mentions, known=known, aligned=aligned, in_rows=in_rows)


def _merged_spans(rows: KnowledgeRows) -> np.ndarray:
    """``(K, 2)`` disjoint ``[start, stop)`` covering every row's segments, sorted."""
    plan = np.asarray(rows.rows.plan)
    if not len(plan):
        return np.zeros((0, 2), dtype=np.int64)
    if rows.pairs:
        starts = np.concatenate([plan[:, 0], plan[:, 2]])
        stops = np.concatenate([plan[:, 0] + plan[:, 1], plan[:, 2] + plan[:, 3]])
    else:
        starts, stops = plan[:, 0], plan[:, 0] + plan[:, 1]
    order = np.argsort(starts, kind="stable")
    starts, stops = starts[order], stops[order]
    reach = np.maximum.accumulate(stops)
    new = np.ones(len(starts), dtype=bool)
    new[1:] = starts[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    merged_stop = np.zeros(int(group[-1]) + 1, dtype=np.int64)
    np.maximum.at(merged_stop, group, reach)
    return np.stack([starts[new], merged_stop], axis=1)


__all__ = ["KnowledgeRows", "KnowledgeStore", "knowledge_coverage"]
