"""ELMo's word corpus: streamed, memory-mapped rows; batches of char ids and word targets."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_classic.recurrent.bilm import BOS_ID, UNK_ID, BiLM, BiLMConfig
from ptm_classic.recurrent.char_cnn import characters_to_ids
from ptm_classic.recurrent.elmo_pretraining import evaluate_perplexity
from ptm_classic.recurrent.word_corpus import (
    ElmoBatches,
    RowSubset,
    prepare_word_corpus,
    split_words,
)

TEXT = "the cat sat on the mat .\nthe dog sat .\n\nA new document , with Curie's 1867 notes .\n"


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_split_words_keeps_punctuation_and_apostrophes() -> None:
    assert split_words("Curie's lab, 1867.") == ["Curie's", "lab", ",", "1867", "."]
    assert split_words("Ça va", lowercase=True) == ["ça", "va"]


def test_word_corpus_rows_types_and_reuse(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path)
    words = prepare_word_corpus(corpus, tmp_path / "wc", max_length=4)
    # 3 sentences of 7, 4 and 9 words -> rows of <= 4 words
    assert [len(words.row(i)) for i in range(words.num_rows)] == [4, 3, 4, 4, 4, 1]
    assert words.num_words == 20
    assert words.types[:3] == [".", "the", "sat"]  # by decreasing frequency
    assert [words.types[t] for t in words.row(0)] == ["the", "cat", "sat", "on"]
    assert words.vocabulary(2) == ["<unk>", "<s>", "</s>", ".", "the"]
    assert words.vocabulary(100, min_count=2) == ["<unk>", "<s>", "</s>", ".", "the", "sat"]
    stamp = (tmp_path / "wc" / "words.bin").stat().st_mtime_ns
    again = prepare_word_corpus(corpus, tmp_path / "wc", max_length=4)
    assert (tmp_path / "wc" / "words.bin").stat().st_mtime_ns == stamp
    assert again.num_rows == words.num_rows
    other = prepare_word_corpus(corpus, tmp_path / "wc", max_length=64)
    assert other.num_rows == 3


def test_batches_hold_char_ids_and_top_k_targets(tmp_path: Path) -> None:
    words = prepare_word_corpus(_corpus(tmp_path), tmp_path / "wc", max_length=64)
    vocab = words.vocabulary(3)  # ".", "the", "sat"
    batches = ElmoBatches(words, len(vocab), batch_size=3, shuffle=False)
    batch = batches.batch(0, 0)
    assert batch["char_ids"].shape == (3, 9, 50)
    first = ["the", "cat", "sat", "on", "the", "mat", "."]
    assert torch.equal(batch["char_ids"][0, :7], characters_to_ids([first])[0])
    assert batch["attention_mask"].sum(1).tolist() == [7, 4, 9]
    expected = [vocab.index(w) if w in vocab else UNK_ID for w in first]
    assert batch["word_targets"][0, :7].tolist() == expected
    assert BOS_ID not in batch["word_targets"][batch["attention_mask"]].tolist()
    # deterministic by position: the same batch twice, another order in another epoch
    shuffled = ElmoBatches(words, len(vocab), batch_size=1, seed=3)
    assert [
        torch.equal(shuffled.batch(1, i)["word_targets"], shuffled.batch(1, i)["word_targets"])
        for i in range(3)
    ] == [True] * 3
    bilm = BiLM(
        BiLMConfig(
            vocab_size=len(vocab),
            filters=[[1, 4], [2, 4]],
            num_highway=1,
            cell_size=16,
            projection_dim=8,
            softmax="full",
        )
    )
    scores = evaluate_perplexity(bilm, batches)
    assert scores["perplexity"] == pytest.approx(
        torch.exp(torch.tensor((scores["forward_nll"] + scores["backward_nll"]) / 2)).item()
    )


@pytest.mark.parametrize("num_rows,every", [(10, 3), (41, 20), (5, 0)])
def test_heldout_split_partitions_the_rows(num_rows: int, every: int) -> None:
    train = list(RowSubset(num_rows, every, held_out=False))
    held = list(RowSubset(num_rows, every, held_out=True))
    assert sorted(train + held) == list(range(num_rows))
    assert all(i % every == 0 for i in held) if every else held == []
