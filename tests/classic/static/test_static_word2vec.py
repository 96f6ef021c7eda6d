"""word2vec through gensim: planted neighbours come first (skip-gram and CBOW)."""

from __future__ import annotations

import pytest
from static_planted import TOPICS, planted_corpus, topic_of

from ptm_classic.static.word2vec import train_word2vec


@pytest.mark.parametrize(
    ("architecture", "negative", "hs"),
    [("skipgram", 5, False), ("cbow", 5, False), ("skipgram", 0, True)],
)
def test_planted_neighbours_come_first(architecture: str, negative: int, hs: bool) -> None:
    table = train_word2vec(
        planted_corpus(),
        architecture=architecture,
        dim=16,
        window=3,
        min_count=1,
        negative=negative,
        hierarchical_softmax=hs,
        sample=0.0,
        epochs=15,
        workers=1,
        seed=1,
    )
    assert table.method == ("word2vec-sg" if architecture == "skipgram" else "word2vec-cbow")
    assert sorted(table.vocab) == sorted(w for words in TOPICS.values() for w in words)
    for word in table.vocab:
        neighbours = [w for w, _ in table.most_similar(word, 4)]
        assert {topic_of(w) for w in neighbours} == {topic_of(word)}, (word, neighbours)
    losses = table.metadata["epoch_losses"]
    assert len(losses) == 15 and losses[-1] < losses[0]


def test_same_seed_gives_the_same_vectors() -> None:
    corpus = planted_corpus(sentences=60)
    settings = dict(dim=8, min_count=1, sample=0.0, epochs=2, workers=1, seed=3)
    first = train_word2vec(corpus, **settings)  # type: ignore[arg-type]
    second = train_word2vec(corpus, **settings)  # type: ignore[arg-type]
    assert first.vocab == second.vocab
    assert (first.vectors == second.vectors).all()


def test_bad_settings_say_the_fix() -> None:
    with pytest.raises(ValueError, match="valid: skipgram, cbow"):
        train_word2vec([["a"]], architecture="glove")
    with pytest.raises(ValueError, match="hierarchical_softmax=true"):
        train_word2vec([["a"]], negative=0)
