"""WKLM's type-constrained entity replacement on one row of word pieces.

Xiong et al. (2020), "Pretrained Encyclopedia: Weakly Supervised Knowledge-Pretrained
Language Model", section 2.2: each entity mention is replaced, with probability 0.5, by
the name of another entity of the same type, and adjacent entities are not both replaced,
so every replaced mention keeps real context next to it. The model then tells original
mentions from replaced ones (:mod:`ptm_knowledge.wklm.detection`).

Here a row is the word pieces of a linked corpus row (ERNIE's prepared store,
:class:`~ptm_knowledge.ernie.KnowledgeRows`): a mention is a run of pieces of one entity
unit, and replacing it splices in the word pieces of the other entity's name. Mention
spans are recomputed on the new sequence.

"Adjacent" is read as consecutive mentions of the row (the (i-1)-th and the i-th,
whatever lies between them): mention ``i`` is eligible only when mention ``i - 1`` was not
replaced. Among eligible mentions the replacement rate is exactly ``replace_prob``; over
a long run of replaceable mentions it is ``p / (1 + p)`` (1/3 at ``p = 0.5``), since
``r = p (1 - r)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_knowledge.kg.graph import EntityTable
from ptm_knowledge.wklm.type_index import EntityTypeIndex

_CACHE_LIMIT = 1 << 16


class SurfaceForms:
    """Word pieces of entity names, tokenised on first use (a KG may hold millions).

    Args:
        entities: the KG's entity table (entity index = row).
        tokenizer: the corpus's tokenizer.
        aliases: draw the name or one of the aliases uniformly (``False``: the canonical
            name only, as the paper's "name of the negative entity").
    """

    def __init__(
        self, entities: EntityTable, tokenizer: TaskTokenizer, *, aliases: bool = False
    ) -> None:
        self.entities = entities
        self.tokenizer = tokenizer
        self.aliases = aliases
        self._cache: dict[tuple[int, int], list[int]] = {}

    def forms(self, entity: int) -> int:
        """How many surface forms entity ``entity`` has to draw from."""
        if not self.aliases:
            return 1
        first, last = self.entities.alias_offsets[entity : entity + 2].tolist()
        return 1 + last - first

    def text(self, entity: int, form: int = 0) -> str:
        """Surface form ``form`` of entity ``entity`` (0: the canonical name)."""
        if form == 0:
            return self.entities.names[entity]
        return self.entities.aliases[int(self.entities.alias_offsets[entity]) + form - 1]

    def pieces(self, entity: int, rng: np.random.Generator) -> list[int]:
        """Word-piece ids of a surface form of ``entity`` (no special tokens)."""
        n = self.forms(entity)
        form = int(rng.integers(n)) if n > 1 else 0
        key = (entity, form)
        cached = self._cache.get(key)
        if cached is None:
            cached = self.tokenizer.tokenize_ids(self.text(entity, form))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[key] = cached
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}


@dataclass
class ReplacementStats:
    """Counts of one or many rows' mentions (add them with ``+``).

    Attributes:
        mentions: mentions seen.
        eligible: mentions that could be replaced and whose previous mention was not.
        replaced: mentions replaced (a subset of ``eligible``).
        blocked: replaceable mentions skipped because the previous mention was replaced.
        single: mentions whose type has no other entity (kept).
        untyped: mentions whose entity has no type (kept).
        truncated: mentions cut off by the row length after replacement (no label).
    """

    mentions: int = 0
    eligible: int = 0
    replaced: int = 0
    blocked: int = 0
    single: int = 0
    untyped: int = 0
    truncated: int = 0

    def __add__(self, other: ReplacementStats) -> ReplacementStats:
        return ReplacementStats(
            **{k: getattr(self, k) + getattr(other, k) for k in self.__dataclass_fields__}
        )


@dataclass
class ReplacedRow:
    """A row after replacement.

    Attributes:
        input_ids, token_type_ids, special_tokens_mask: ``(L',)`` the new row.
        spans: ``(first, stop)`` piece span of each labelled mention in the new row.
        originals: each labelled mention's entity before replacement.
        entities: the entity each labelled mention now names (``== originals`` if kept).
        replaced: each labelled mention's label.
        stats: the counts of this row.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    special_tokens_mask: list[int]
    spans: list[tuple[int, int]] = field(default_factory=list)
    originals: list[int] = field(default_factory=list)
    entities: list[int] = field(default_factory=list)
    replaced: list[bool] = field(default_factory=list)
    stats: ReplacementStats = field(default_factory=ReplacementStats)

    def example(self) -> dict[str, Any]:
        """The row as a training example: the per-token columns the objectives read.

        ``mention_labels`` is 1 (replaced) / 0 (original) on each mention's first piece and
        ``-100`` elsewhere; ``mention_ends`` holds the mention's last piece there;
        ``mention_mask`` is 1 on every mention piece (kept out of MLM).
        """
        length = len(self.input_ids)
        labels = [IGNORE_INDEX] * length
        ends = [0] * length
        inside = [0] * length
        for (first, stop), was_replaced in zip(self.spans, self.replaced, strict=True):
            labels[first] = int(was_replaced)
            ends[first] = stop - 1
            inside[first:stop] = [1] * (stop - first)
        return {
            "input_ids": self.input_ids,
            "token_type_ids": self.token_type_ids,
            "special_tokens_mask": self.special_tokens_mask,
            "mention_labels": labels,
            "mention_ends": ends,
            "mention_mask": inside,
        }


def row_mentions(
    entity_units: Sequence[int], entity_ids: Sequence[int]
) -> list[tuple[int, int, int]]:
    """``(first, stop, entity)`` of each mention of an ERNIE row, in order.

    A mention is a run of one entity unit whose first piece carries an entity
    (``entity_ids``, bound to KG indices); units without one are not mentions here.
    """
    out = []
    i, n = 0, len(entity_units)
    while i < n:
        unit = entity_units[i]
        j = i + 1
        if unit != -1:
            while j < n and entity_units[j] == unit:
                j += 1
            if entity_ids[i] >= 0:
                out.append((i, j, int(entity_ids[i])))
        i = j
    return out


def replace_mentions(
    row: Mapping[str, Sequence[int]],
    mentions: Sequence[tuple[int, int, int]],
    types: EntityTypeIndex,
    surfaces: SurfaceForms,
    rng: np.random.Generator,
    *,
    replace_prob: float = 0.5,
    max_length: int | None = None,
) -> ReplacedRow:
    """Replace mentions by same-type entities, never two consecutive mentions.

    Args:
        row: ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` (``(L,)`` lists;
            the last piece is the row's final ``[SEP]``).
        mentions: ``(first, stop, entity)`` piece spans, sorted, disjoint, inside the row.
        types: the KG's entities grouped by type.
        surfaces: the word pieces of entity names.
        rng: the seeded source of randomness.
        replace_prob: probability that an eligible mention is replaced.
        max_length: cut a row that grew past it (the final ``[SEP]`` is kept); mentions
            cut are left unlabelled.

    Returns:
        The :class:`ReplacedRow`.
    """
    ids = list(row["input_ids"])
    types_of = list(row["token_type_ids"])
    special = list(row["special_tokens_mask"])
    stats = ReplacementStats(mentions=len(mentions))
    entities = np.asarray([m[2] for m in mentions], dtype=np.int64)
    can = types.replaceable(entities) if len(entities) else np.zeros(0, dtype=bool)
    draws = rng.random(len(mentions))
    chosen = np.zeros(len(mentions), dtype=bool)
    previous = False
    for k in range(len(mentions)):
        if not can[k]:
            if types.type_codes[entities[k]] < 0:
                stats.untyped += 1
            else:
                stats.single += 1
            previous = False
        elif previous:
            stats.blocked += 1
            previous = False
        else:
            stats.eligible += 1
            previous = chosen[k] = bool(draws[k] < replace_prob)
    stats.replaced = int(chosen.sum())
    new_entities = entities.copy()
    if chosen.any():
        new_entities[chosen] = types.sample_other(entities[chosen], rng)

    out = ReplacedRow([], [], [], stats=stats)
    cursor = 0
    for k, (first, stop, _) in enumerate(mentions):
        out.input_ids += ids[cursor:first]
        out.token_type_ids += types_of[cursor:first]
        out.special_tokens_mask += special[cursor:first]
        start = len(out.input_ids)
        pieces = surfaces.pieces(int(new_entities[k]), rng) if chosen[k] else []
        if chosen[k] and pieces:
            out.input_ids += pieces
            out.token_type_ids += [types_of[first]] * len(pieces)
            out.special_tokens_mask += [0] * len(pieces)
        else:
            out.input_ids += ids[first:stop]
            out.token_type_ids += types_of[first:stop]
            out.special_tokens_mask += special[first:stop]
        out.spans.append((start, len(out.input_ids)))
        out.originals.append(int(entities[k]))
        out.entities.append(int(new_entities[k]) if pieces else int(entities[k]))
        out.replaced.append(bool(chosen[k] and pieces))
        cursor = stop
    out.input_ids += ids[cursor:]
    out.token_type_ids += types_of[cursor:]
    out.special_tokens_mask += special[cursor:]
    stats.replaced = sum(out.replaced)
    if max_length is not None and len(out.input_ids) > max_length:
        _truncate(out, max_length)
    return out


def _truncate(out: ReplacedRow, max_length: int) -> None:
    """Keep ``max_length - 1`` pieces plus the final one (``[SEP]``); drop cut mentions."""
    body = max_length - 1
    for key in ("input_ids", "token_type_ids", "special_tokens_mask"):
        column = getattr(out, key)
        setattr(out, key, column[:body] + column[-1:])
    keep = [stop <= body for _, stop in out.spans]
    out.stats.truncated = keep.count(False)
    for key in ("spans", "originals", "entities", "replaced"):
        setattr(out, key, [v for v, k in zip(getattr(out, key), keep, strict=True) if k])


__all__ = [
    "ReplacedRow",
    "ReplacementStats",
    "SurfaceForms",
    "replace_mentions",
    "row_mentions",
]
