"""Translation pairs: direction, target vocabulary and batches."""

from __future__ import annotations

import pytest
import torch

from ptm_classic.cove.pairs import (
    EOS_ID,
    IGNORE,
    UNK_ID,
    TranslationBatches,
    target_vocabulary,
    translation_examples,
)
from ptm_core.data.parallel_corpus import ParallelCorpus

CORPORA = [
    ParallelCorpus("en", "de", (("The cat sees.", "Die Katze sieht."),), "en-de.tsv"),
    ParallelCorpus("fr", "en", (("Le chien.", "The dog."),), "fr-en.tsv"),
    ParallelCorpus("de", "fr", (("Der Hund.", "Le chien."),), "de-fr.tsv"),
]


def test_pairs_out_of_english_from_either_side() -> None:
    examples = translation_examples(CORPORA, source_lang="en")
    assert [(e.source, e.target_lang, e.target) for e in examples] == [
        (("the", "cat", "sees", "."), "de", ("die", "katze", "sieht", ".")),
        (("the", "dog", "."), "fr", ("le", "chien", ".")),
    ]
    assert len(translation_examples(CORPORA, source_lang="en", target_langs=["fr"])) == 1
    with pytest.raises(ValueError, match=r"data\.source_lang"):
        translation_examples(CORPORA, source_lang="en", target_langs=["ja"])


def test_vocabulary_and_batches() -> None:
    examples = translation_examples(CORPORA, source_lang="en")
    vocab = target_vocabulary(examples)
    assert vocab[:5] == ["<pad>", "<unk>", "</s>", "<2de>", "<2fr>"]
    assert vocab[5] == "."  # most frequent target word first
    rows = {"the": 2, "cat": 3}

    def ids(sentences: list[list[str]], width: int) -> torch.Tensor:
        out = torch.zeros(len(sentences), width, dtype=torch.long)
        for b, words in enumerate(sentences):
            out[b, : len(words)] = torch.tensor([rows.get(w, 1) for w in words])
        return out

    batches = TranslationBatches(examples, ids, vocab[:-1], batch_size=2, shuffle=False)
    batch = next(batches.iter_batches(0))
    assert batch["source_ids"].tolist() == [[2, 3, 1, 1], [2, 1, 1, 0]]
    assert batch["source_mask"].tolist() == [[True] * 4, [True, True, True, False]]
    de, fr = vocab.index("<2de>"), vocab.index("<2fr>")
    assert batch["target_ids"][:, 0].tolist() == [de, fr]
    labels = batch["target_labels"]
    assert labels[0, 4].item() == EOS_ID and labels[1, 3].item() == EOS_ID
    assert labels[1, 4].item() == IGNORE
    assert UNK_ID in labels[0].tolist()  # the word cut from the vocabulary
