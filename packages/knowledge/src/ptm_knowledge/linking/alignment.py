"""Put character-level mentions onto word pieces (ERNIE-THU's token-entity alignment)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

NO_ENTITY = -1


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
    overlaps the mention's span.

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
    special = special_tokens_mask or [0] * len(offsets)
    for start, end, entity_id in mentions:
        index = entity_index.get(entity_id)
        if index is None:
            continue
        for position, (piece_start, piece_end) in enumerate(offsets):
            if special[position] or piece_end <= piece_start:
                continue
            if piece_start < end and start < piece_end:
                out[position] = index
                break  # first piece only
    return out


def mention_piece_spans(
    offsets: Sequence[tuple[int, int]],
    spans: Sequence[tuple[int, int]],
    special_tokens_mask: Sequence[int] | None = None,
) -> list[tuple[int, int]]:
    """Piece ranges ``[first, last + 1)`` covered by character spans (empty spans dropped).

    Used to turn mentions and phrases into masking units (ERNIE-Baidu).
    """
    special = special_tokens_mask or [0] * len(offsets)
    out: list[tuple[int, int]] = []
    for start, end in spans:
        covered = [
            i
            for i, (a, b) in enumerate(offsets)
            if not special[i] and b > a and a < end and start < b
        ]
        if covered:
            out.append((covered[0], covered[-1] + 1))
    return out
