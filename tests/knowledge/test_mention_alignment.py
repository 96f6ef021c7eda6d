"""Mentions onto word pieces: the first piece carries the entity, the others -1."""

from __future__ import annotations

from knowledge_sample_paths import VOCAB

from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.linking import NO_ENTITY, align_mentions_to_pieces, mention_piece_spans


def test_first_piece_carries_entity() -> None:
    tok = WordPieceTokenizer.from_vocab(VOCAB, lowercase=True)
    text = "Maria Skłodowska moved to Paris."
    enc = tok.encode(text)
    mentions = [(0, 16, "marie_curie"), (26, 31, "paris"), (0, 3, "not_in_table")]
    ids = align_mentions_to_pieces(
        enc.offsets, mentions, {"marie_curie": 7, "paris": 3}, enc.special_tokens_mask
    )
    assert len(ids) == len(enc.input_ids)
    pieces = [i for i, (a, b) in enumerate(enc.offsets) if a < 16 and b > 0 and b > a]
    assert len(pieces) > 2  # "Skłodowska" splits into several pieces
    assert ids[pieces[0]] == 7
    assert all(ids[i] == NO_ENTITY for i in pieces[1:])
    paris = next(i for i, t in enumerate(enc.tokens) if t == "paris")
    assert ids[paris] == 3
    assert ids[0] == NO_ENTITY and ids[-1] == NO_ENTITY  # [CLS], [SEP]
    assert sum(i != NO_ENTITY for i in ids) == 2
    spans = mention_piece_spans(enc.offsets, [(0, 16)], enc.special_tokens_mask)
    assert spans == [(pieces[0], pieces[-1] + 1)]
