"""Word streams: restartable, from raw files or a prepared corpus, never a list in memory."""

from __future__ import annotations

from pathlib import Path

from ptm_classic.static.corpus import SentenceCorpus, build_vocabulary, join_word_pieces
from ptm_core.data.prepare import prepare_corpus

VOCAB = Path(__file__).parents[3] / "data_specs" / "text_corpus" / "sample-vocab.txt"


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text(
        "The river flows to the sea.\nBirds sing at dawn.\n\nThe sea is deep, and cold.\n",
        encoding="utf-8",
    )
    return path


def test_raw_corpus_restarts_and_splits_words(tmp_path: Path) -> None:
    corpus = SentenceCorpus(_write(tmp_path))
    first = list(corpus)
    assert first == list(corpus)  # a second pass starts from the top
    assert first[0] == ["the", "river", "flows", "to", "the", "sea", "."]
    assert first[2] == ["the", "sea", "is", "deep", ",", "and", "cold", "."]
    assert SentenceCorpus(_write(tmp_path), lowercase=False).__iter__().__next__()[0] == "The"
    vocabulary = build_vocabulary(corpus, min_count=2)
    assert vocabulary.words == [".", "the", "sea"] and vocabulary.counts == [3, 3, 2]
    assert vocabulary.total_words == 20


def test_long_sentences_are_cut(tmp_path: Path) -> None:
    rows = list(SentenceCorpus(_write(tmp_path), max_sentence_length=3))
    assert rows[0] == ["the", "river", "flows"] and rows[2] == ["."]


def test_prepared_corpus_gives_the_same_words(tmp_path: Path) -> None:
    path = _write(tmp_path)
    prepared = prepare_corpus(
        path, tmp_path / "prepared", tokenizer=VOCAB, workers=0, progress=False
    )
    words = list(SentenceCorpus(prepared=prepared.directory))
    assert words == list(SentenceCorpus(path))
    assert (
        SentenceCorpus(prepared=prepared.directory).fingerprint()
        != SentenceCorpus(path).fingerprint()
    )


def test_join_word_pieces() -> None:
    assert join_word_pieces(["[CLS]", "play", "##ing", "well", "[SEP]"]) == ["playing", "well"]
