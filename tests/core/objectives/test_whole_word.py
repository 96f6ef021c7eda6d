"""Whole-word masking: never splits a word, 15% of pieces on average, 80/10/10 per piece."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core import bert_encoder
from ptm_core.objectives import (
    IGNORE_INDEX,
    WholeWordMaskedLMObjective,
    WordBoundaries,
    whole_word_mask_tokens,
)
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer

VOCAB = VocabInfo(vocab_size=1000, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
# Ids 500.. are "##" continuation pieces.
CONTINUATION = torch.arange(VOCAB.vocab_size) >= 500
SAMPLE_VOCAB = (
    Path(__file__).resolve().parents[3] / "data_specs" / "text_corpus" / "sample-vocab.txt"
)


def synthetic_words(
    rows: int, length: int, continuation_rate: float = 0.4, seed: int = 7
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of ``[CLS] pieces [SEP] [PAD]...`` where ~40% of pieces continue a word."""
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(5, 500, (rows, length), generator=gen)
    conts = torch.randint(500, VOCAB.vocab_size, (rows, length), generator=gen)
    ids = torch.where(torch.rand(rows, length, generator=gen) < continuation_rate, conts, starts)
    lengths = torch.randint(length // 2, length + 1, (rows,), generator=gen)
    pad = torch.arange(length)[None, :] >= lengths[:, None]
    ids[:, 0] = VOCAB.cls_id
    ids[torch.arange(rows), lengths - 1] = VOCAB.sep_id
    ids[pad] = VOCAB.pad_id
    special = (ids == VOCAB.cls_id) | (ids == VOCAB.sep_id) | pad
    return ids, special


def test_word_index_follows_continuations_and_restarts_after_specials() -> None:
    boundaries = WordBoundaries(CONTINUATION)
    # [CLS] w ##x ##y v [SEP] ##z(row cut inside a word) u
    ids = torch.tensor([[2, 10, 600, 601, 11, 3, 602, 12]])
    special = ids.lt(5)
    index = boundaries.word_index(ids, ~special)
    assert index.tolist() == [[-1, 0, 0, 0, 1, -1, 2, 3]]


def test_whole_words_are_never_split_and_the_rate_is_15_percent() -> None:
    ids, special = synthetic_words(rows=500, length=300)
    boundaries = WordBoundaries(CONTINUATION)
    corrupted, labels = whole_word_mask_tokens(
        ids, special, boundaries, VOCAB, torch.Generator().manual_seed(0)
    )
    candidates = ~special
    assert int(candidates.sum()) >= 100_000
    selected = labels != IGNORE_INDEX
    assert not (selected & special).any()
    rate = selected.sum().item() / candidates.sum().item()
    assert abs(rate - 0.15) <= 0.01, rate
    # Every word is either fully selected or not at all.
    words = boundaries.word_index(ids, candidates)
    offset = (words.max() + 1) * torch.arange(words.shape[0])[:, None]
    flat = (words + offset)[candidates]
    chosen = selected[candidates].long()
    per_word_total = torch.bincount(flat)
    per_word_chosen = torch.bincount(flat, weights=chosen.double()).long()
    touched = per_word_chosen > 0
    assert touched.sum() > 1000
    assert torch.equal(per_word_chosen[touched], per_word_total[touched])
    # Multi-piece words are selected too (the test would pass trivially otherwise).
    assert (per_word_total[touched] > 1).sum() > 500
    # 80/10/10 per piece, as BERT.
    n = selected.sum().item()
    masked = ((corrupted == VOCAB.mask_id) & selected).sum().item() / n
    kept = ((corrupted == ids) & selected).sum().item() / n
    assert abs(masked - 0.8) <= 0.015 and abs(kept - 0.1) <= 0.015
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_objective_reads_word_boundaries_from_the_tokenizer() -> None:
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    vocab = tokenizer.vocab_info
    encoder = bert_encoder(vocab_size=vocab.vocab_size, hidden_size=16, num_layers=1, num_heads=2)
    objective = build_objective(WholeWordMaskedLMObjective, encoder, vocab, tokenizer=SAMPLE_VOCAB)
    text = "Marie Curie studied radioactivity in Paris and Warsaw " * 6
    encoded = tokenizer.encode(text)
    starts = torch.tensor(tokenizer.word_start_mask(encoded.input_ids))
    assert (~starts).sum() > 0, "the sentence must contain multi-piece words"
    ids = torch.tensor([encoded.input_ids] * 64)
    special = torch.tensor([encoded.special_tokens_mask] * 64)
    batch = objective.collate(
        {"input_ids": ids, "special_tokens_mask": special}, torch.Generator().manual_seed(1)
    )
    selected = batch["mlm_labels"] != IGNORE_INDEX
    # A continuation piece is selected exactly when the piece before it is.
    cont = ~starts
    cont[0] = False
    positions = cont.nonzero().squeeze(1)
    assert torch.equal(selected[:, positions], selected[:, positions - 1])
    assert selected.any()


def test_missing_tokenizer_is_a_clear_error() -> None:
    encoder = bert_encoder(vocab_size=VOCAB.vocab_size, hidden_size=16, num_layers=1, num_heads=2)
    objective = build_objective(WholeWordMaskedLMObjective, encoder, VOCAB)
    ids, special = synthetic_words(rows=2, length=10)
    with pytest.raises(ValueError, match="needs word boundaries"):
        objective.collate(
            {"input_ids": ids, "special_tokens_mask": special}, torch.Generator().manual_seed(0)
        )
    with pytest.raises(FileNotFoundError, match=r"data\.tokenizer"):
        build_objective(
            WholeWordMaskedLMObjective, encoder, VOCAB, tokenizer="/nonexistent/vocab.txt"
        )


class TestWholeWordContract(ObjectiveTestCase):
    objective_cls = WholeWordMaskedLMObjective
    vocab = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB).vocab_info
    kwargs = MappingProxyType({"tokenizer": SAMPLE_VOCAB})
