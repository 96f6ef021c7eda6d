"""Put character-level mentions onto word pieces (ERNIE-THU's token-entity alignment)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence

NO_ENTITY = -1


class _PieceIndex:
    """The pieces that can hold a span (not special, not empty), searchable by offset.

    Pieces of one tokenised text have non-decreasing offsets, so the pieces overlapping a
    character span ``[start, end)`` are one contiguous run, found by two binary searches:
    ``O(n)`` to build, ``O(log n)`` per span. (Scanning every piece for every span was
    quadratic: a one-sentence line of 20k words took 27 s to annotate.) Offsets that are
    not monotone (never produced by our tokenizer) fall back to the plain scan.
    """

    def __init__(
        self, offsets: Sequence[tuple[int, int]], special_tokens_mask: Sequence[int] | None
    ) -> None:
        special = special_tokens_mask
        self.positions: list[int] = []
        self.starts: list[int] = []
        self.ends: list[int] = []
        for position, (start, end) in enumerate(offsets):
            if (special is not None and special[position]) or end <= start:
                continue
            self.positions.append(position)
            self.starts.append(start)
            self.ends.append(end)
        self.sorted = all(a <= b for a, b in itertools.pairwise(self.starts)) and all(
            a <= b for a, b in itertools.pairwise(self.ends)
        )

    def covered(self, start: int, end: int) -> tuple[int, int] | None:
        """Positions of the first and last pieces overlapping ``[start, end)``, or ``None``."""
        if self.sorted:
            first = bisect.bisect_right(self.ends, start)  # first piece ending after start
            stop = bisect.bisect_left(self.starts, end)  # first piece starting at/after end
            if first >= stop:
                return None
            return self.positions[first], self.positions[stop - 1]
        hits = [
            position
            for k, position in enumerate(self.positions)
            if self.starts[k] < end and start < self.ends[k]
        ]
        return (hits[0], hits[-1]) if hits else None


def align_mentions_to_pieces(
    offsets: Sequence[tuple[int, int]],
    mentions: Sequence[tuple[int, int, str]],
    entity_index: Mapping[str, int],
    special_tokens_mask: Sequence[int] | None = None,
) -> list[int]:
    """One entity index per word piece: the first piece of a mention carries the entity.

    As in ERNIE (Zhang et al., 2019): the entity is aligned to the first token of its
    mention; the other pieces of the mention, and pieces outside mentions, get
    :data:`NO_ENTITY` (``-1``). A piece belongs to a mention when its character span
    overlaps the mention's span. Linear in the number of pieces plus ``log`` per mention.

    Args:
        offsets: ``(start, end)`` character offsets per piece (as
            :class:`ptm_core.tokenization.TokenizedText.offsets`).
        mentions: ``(start, end, entity_id)`` in the same character coordinates.
        entity_index: entity id -> row of the entity embedding table. Mentions of ids
            not in it are skipped (e.g. entities without embeddings).
        special_tokens_mask: 1 at ``[CLS]``/``[SEP]``/padding (offsets ``(0, 0)``), which
            never carry an entity.

    Returns:
        ``len(offsets)`` ints, ``-1`` or an entity index.
    """
    out = [NO_ENTITY] * len(offsets)
    pieces = _PieceIndex(offsets, special_tokens_mask)
    for start, end, entity_id in mentions:
        index = entity_index.get(entity_id)
        if index is None:
            continue
        covered = pieces.covered(start, end)
        if covered is not None:
            out[covered[0]] = index
    return out


def mention_piece_spans(
    offsets: Sequence[tuple[int, int]],
    spans: Sequence[tuple[int, int]],
    special_tokens_mask: Sequence[int] | None = None,
) -> list[tuple[int, int]]:
    """Piece ranges ``[first, last + 1)`` covered by character spans (empty spans dropped).

    Used to turn mentions and phrases into masking units (ERNIE-Baidu). Linear in the
    number of pieces plus ``log`` per span.
    """
    pieces = _PieceIndex(offsets, special_tokens_mask)
    out: list[tuple[int, int]] = []
    for start, end in spans:
        covered = pieces.covered(start, end)
        if covered is not None:
            out.append((covered[0], covered[1] + 1))
    return out
