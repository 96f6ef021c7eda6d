"""Entity descriptions tokenised once into flat arrays, for KEPLER's entity encoder.

A KG can have millions of entities, so the word-piece ids are never held as Python lists:
descriptions are streamed from the entity table in chunks, tokenised, and appended to one
``int32`` id array with ``int64`` offsets (CSR). A batch of entities is cut out of it and
padded on demand (:meth:`EntityDescriptions.batch`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from ptm_knowledge.kg.graph import ENTITY_COLUMNS, KGError, KnowledgeGraph
from ptm_knowledge.kg.load import load_knowledge_graph

logger = logging.getLogger(__name__)

DESCRIPTION_COLUMN = "description"


class TokenizesText(Protocol):
    """What :class:`EntityDescriptions` needs of a tokenizer (``WordPieceTokenizer``)."""

    def tokenize_ids_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


class EntityDescriptions:
    """``[CLS] description [SEP]`` word-piece ids of every entity, in entity-table order.

    Args:
        ids: ``(total,)`` int32 ids of every entity's row, specials included, end to end.
        offsets: ``(N + 1,)`` int64; entity ``i``'s row is ``ids[offsets[i]:offsets[i+1]]``.
        pad_id: the padding id used by :meth:`batch`.
    """

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, pad_id: int) -> None:
        if offsets.ndim != 1 or len(offsets) < 1 or int(offsets[-1]) != len(ids):
            raise ValueError("offsets must be (N + 1,) with offsets[-1] == len(ids)")
        self.ids, self.offsets, self.pad_id = ids, offsets, pad_id

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """``(N,)`` row length of each entity, specials included."""
        return np.diff(self.offsets)

    def row(self, index: int) -> np.ndarray:
        """Entity ``index``'s ids (a view)."""
        return self.ids[int(self.offsets[index]) : int(self.offsets[index + 1])]

    def batch(self, indices: Tensor | Sequence[int]) -> tuple[Tensor, Tensor]:
        """Padded ids and attention mask of the given entities.

        Args:
            indices: ``(U,)`` entity indices.

        Returns:
            ``(input_ids, attention_mask)``, both ``(U, L)`` with ``L`` the longest row.
        """
        rows = [int(i) for i in (indices.tolist() if isinstance(indices, Tensor) else indices)]
        starts, ends = self.offsets[rows], self.offsets[np.asarray(rows, dtype=np.int64) + 1]
        width = int((ends - starts).max()) if rows else 1
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=bool)
        for k, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            ids[k, : end - start] = self.ids[start:end]
            mask[k, : end - start] = True
        return torch.from_numpy(ids), torch.from_numpy(mask)

    @classmethod
    def from_texts(
        cls,
        texts: Sequence[str],
        tokenizer: TokenizesText,
        *,
        cls_id: int,
        sep_id: int,
        pad_id: int,
        max_length: int = 64,
        chunk_size: int = 8192,
    ) -> EntityDescriptions:
        """Tokenise texts chunk by chunk into one flat array.

        Args:
            texts: one text per entity (a sequence read lazily, e.g. a string column).
            tokenizer: the run's tokenizer.
            cls_id, sep_id, pad_id: special ids.
            max_length: row length with ``[CLS]``/``[SEP]``; longer descriptions are cut.
            chunk_size: texts tokenised at once.

        Returns:
            :class:`EntityDescriptions`.
        """
        if max_length < 3:
            raise ValueError(f"description max_length must be at least 3, got {max_length}")
        chunks: list[np.ndarray] = []  # one array per chunk, not one per entity
        lengths = np.zeros(len(texts), dtype=np.int64)
        keep = max_length - 2
        for start in range(0, len(texts), chunk_size):
            chunk = [texts[i] for i in range(start, min(start + chunk_size, len(texts)))]
            rows = []
            for k, ids in enumerate(tokenizer.tokenize_ids_batch(chunk)):
                row = np.empty(min(len(ids), keep) + 2, dtype=np.int32)
                row[0], row[-1] = cls_id, sep_id
                row[1:-1] = ids[:keep]
                rows.append(row)
                lengths[start + k] = len(row)
            chunks.append(np.concatenate(rows))
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
        return cls(flat, offsets, pad_id)


class _DescriptionTexts(Sequence[str]):
    """Entity ``i``'s description, or its name where the description cell is empty."""

    def __init__(self, kg: KnowledgeGraph, fallback_to_name: bool) -> None:
        self.descriptions, self.names = kg.entities.descriptions, kg.entities.names
        self.fallback_to_name = fallback_to_name

    def __len__(self) -> int:
        return len(self.descriptions)

    def __getitem__(self, index):
        text = self.descriptions[index]
        return text if text or not self.fallback_to_name else self.names[index]


def check_descriptions(kg: KnowledgeGraph, source: str | Path, *, allow_missing: bool) -> int:
    """Count entities without a description; refuse a table that has none at all.

    Args:
        kg: the loaded graph.
        source: the ``entities.tsv`` it came from (named in the error).
        allow_missing: accept empty cells (the entity's name is encoded instead).

    Returns:
        The number of entities with an empty description.

    Raises:
        KGError: every description is empty, or some are and ``allow_missing`` is false.
    """
    empty = [i for i, text in enumerate(kg.entities.descriptions) if not text]
    if empty and (len(empty) == len(kg) or not allow_missing):
        first = kg.entities.ids[empty[0]]
        raise KGError(
            source,
            None,
            DESCRIPTION_COLUMN,
            f"{len(empty)} of {len(kg)} entities have an empty description (first: {first!r}); "
            "KEPLER encodes each entity's description with the text encoder",
            "fill the description column"
            + ("" if len(empty) == len(kg) else " or set kepler.allow_missing_descriptions=true"),
        )
    if empty:
        logger.warning("%s: %d entities without description use their name", source, len(empty))
    return len(empty)


def load_description_graph(
    path: str | Path, *, allow_missing: bool = True, cache_dir: str | Path | None = None
) -> KnowledgeGraph:
    """Load a KG for KEPLER: an entity table with a ``description`` column, and triples.

    Args:
        path: a folder with ``entities.tsv`` and ``triples.tsv``, or the ``entities.tsv``.
        allow_missing: see :func:`check_descriptions`.
        cache_dir: as :func:`~ptm_knowledge.kg.load_knowledge_graph`.

    Returns:
        The graph (with triples).

    Raises:
        KGError: the header has no ``description`` column (the message names the file and
            the column), every description is empty, or there are no triples.
    """
    path = Path(path)
    entities = path / "entities.tsv" if path.is_dir() else path
    _check_header(entities)
    kg = load_knowledge_graph(path, cache_dir=cache_dir)
    check_descriptions(kg, entities, allow_missing=allow_missing)
    if not len(kg.triples):
        raise KGError(path, None, "triples", "no triples", "put a triples.tsv beside entities.tsv")
    return kg


def _check_header(entities: Path) -> None:
    """Name the missing ``description`` column before the generic header error."""
    if not entities.is_file():
        return  # the loader names the missing file
    with entities.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cells = [c.strip() for c in line.rstrip("\r\n").split("\t")]
            if DESCRIPTION_COLUMN not in cells:
                raise KGError(
                    entities,
                    number,
                    DESCRIPTION_COLUMN,
                    f"the header has no {DESCRIPTION_COLUMN!r} column (got "
                    f"{'<TAB>'.join(cells)}); KEPLER encodes each entity's description",
                    f"use the header {'<TAB>'.join(ENTITY_COLUMNS)} and give every entity a "
                    "description",
                )
            return


def tokenize_descriptions(
    kg: KnowledgeGraph,
    tokenizer: TokenizesText,
    *,
    cls_id: int,
    sep_id: int,
    pad_id: int,
    max_length: int = 64,
    fallback_to_name: bool = True,
    chunk_size: int = 8192,
) -> EntityDescriptions:
    """Tokenise every entity's description once (the name where it is empty).

    Args:
        kg: the graph (its entity order is the row order).
        tokenizer: the run's tokenizer.
        cls_id, sep_id, pad_id: special ids.
        max_length: row length with ``[CLS]``/``[SEP]``.
        fallback_to_name: encode the name of an entity without description.
        chunk_size: texts tokenised at once.

    Returns:
        :class:`EntityDescriptions` with one row per entity.
    """
    return EntityDescriptions.from_texts(
        _DescriptionTexts(kg, fallback_to_name),
        tokenizer,
        cls_id=cls_id,
        sep_id=sep_id,
        pad_id=pad_id,
        max_length=max_length,
        chunk_size=chunk_size,
    )
