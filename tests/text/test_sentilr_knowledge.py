"""SentiLARE's word knowledge: POS from WordNet's index files (a hand-written index in the
wndb format) or the rule set, polarity from VADER's lexicon, pieces aligned to words."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptm_core.tokenization import WordPieceTokenizer
from ptm_text.sentilr.data import annotate_text, label_names, read_labelled_corpus
from ptm_text.sentilr.knowledge import (
    ADJECTIVE,
    ADVERB,
    NEGATIVE,
    NEUTRAL,
    NOUN,
    OTHER,
    POSITIVE,
    VERB,
    KnowledgeAnnotator,
    LexicalPosTagger,
    LexiconPolarity,
    SpacyPosTagger,
    read_wordnet_index,
    vader_lexicon,
)

# wndb(5WN): lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt offsets...
INDEX = {
    "noun": ["  1 license line", "book n 2 1 @ 2 5 01 02", "run n 3 1 @ 3 2 01 02 03",
             "fast n 1 0 1 0 01"],
    "verb": ["book v 2 0 2 1 01 02", "run v 5 2 @ ~ 5 30 01 02 03 04 05", "stop v 1 0 1 4 01"],
    "adj": ["fast a 3 0 3 6 01 02 03", "happy a 1 0 1 9 01"],
    "adv": ["fast r 2 0 2 3 01 02"],
}  # fmt: skip


def _wordnet(tmp_path: Path) -> Path:
    for name, lines in INDEX.items():
        (tmp_path / f"index.{name}").write_text("\n".join(lines) + "\n")
    (tmp_path / "verb.exc").write_text("ran run\nstopped stop\n")
    return tmp_path


def test_wordnet_picks_the_part_of_speech_with_most_tagged_senses(tmp_path: Path) -> None:
    tagger = LexicalPosTagger(_wordnet(tmp_path))
    assert "WordNet" in tagger.source
    # book: noun 5 tagged senses vs verb 1; run: verb 30 vs noun 2; fast: adjective 6
    assert tagger(["book", "run", "fast", "happy"]) == [NOUN, VERB, ADJECTIVE, ADJECTIVE]
    # detachment: "books" -> book (noun), "runs" -> run (verb); the exception list:
    # "stopped" -> stop, "ran" -> run; unknown -> other
    assert tagger(["books", "runs", "stopped", "ran", "zorblat"]) == [NOUN, VERB, VERB, VERB, OTHER]
    # closed classes before any lookup; be/have/do are verbs, as a Penn tagger has them
    assert tagger(["the", "of", "was", "had", ".", "42"]) == [
        OTHER,
        OTHER,
        VERB,
        VERB,
        OTHER,
        OTHER,
    ]


def test_a_broken_index_line_names_the_file_and_line(tmp_path: Path) -> None:
    _wordnet(tmp_path)
    (tmp_path / "index.adv").write_text("fast r x\n")
    read_wordnet_index.cache_clear()
    with pytest.raises(ValueError, match=r"index.adv:1"):
        read_wordnet_index(tmp_path)


def test_without_wordnet_the_rule_set_tags_by_suffix(tmp_path: Path) -> None:
    tagger = LexicalPosTagger(tmp_path, rated={"bland"})  # a folder without index files
    assert tagger.source == "the suffix rule set"
    words = ["quickly", "friendly", "wonderful", "helped", "happiness", "bland", "table", "a"]
    assert tagger(words) == [ADVERB, ADJECTIVE, ADJECTIVE, VERB, NOUN, ADJECTIVE, NOUN, OTHER]


def test_vader_ratings_give_the_polarity_of_content_words_only() -> None:
    lexicon = vader_lexicon()
    assert lexicon["good"] > 0 > lexicon["bad"] and len(lexicon) > 7000
    polarity = LexiconPolarity()
    words = ["good", "bad", "table", "no"]
    assert polarity(words, [ADJECTIVE, ADJECTIVE, NOUN, NOUN]) == [
        POSITIVE, NEGATIVE, NEUTRAL, NEGATIVE,
    ]  # fmt: skip
    # as the reference, "other" words are not looked up ("no" is rated -1.2 by VADER)
    assert polarity(["no"], [OTHER]) == [NEUTRAL]
    strict = LexiconPolarity(threshold=2.0)  # good 1.9, love 3.2
    assert strict(["good", "love"], [ADJECTIVE, VERB]) == [NEUTRAL, POSITIVE]
    with pytest.raises(ValueError, match="polarity_threshold"):
        LexiconPolarity(threshold=-1)


def test_a_spacy_pipeline_that_is_not_installed_is_named() -> None:
    pytest.importorskip("spacy")
    with pytest.raises(OSError, match="pos_pipeline='no_such_pipeline_xx'"):
        SpacyPosTagger("no_such_pipeline_xx")


def test_every_piece_of_a_word_carries_the_word_knowledge(tmp_path: Path) -> None:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "soup", "was", "horr",
             "##ible", "good", "!", "not"]  # fmt: skip
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = WordPieceTokenizer.from_vocab(tmp_path / "vocab.txt", lowercase=True)
    piece = annotate_text("The soup was horrible, not good!", tok, KnowledgeAnnotator(None), 64)
    tokens = tok.convert_ids_to_tokens(piece.input_ids)
    assert tokens == ["[CLS]", "the", "soup", "was", "horr", "##ible", "[UNK]", "not", "good",
                      "!", "[SEP]"]  # fmt: skip
    assert piece.words == [0, 1, 2, 3, 4, 4, 5, 6, 7, 8, 0]  # 1-based; 0 off words
    horrible = piece.polarity[4:6]
    assert horrible == [NEGATIVE, NEGATIVE] and piece.pos[4] == piece.pos[5]
    assert piece.polarity[8] == POSITIVE and piece.pos[0] == OTHER
    cut = annotate_text("The soup was horrible, not good!", tok, KnowledgeAnnotator(None), 5)
    assert len(cut.input_ids) == 5 and cut.input_ids[-1] == tok.vocab_info.sep_id


def test_labelled_corpus_errors_name_the_file_line_and_field(tmp_path: Path) -> None:
    good = tmp_path / "r.jsonl"
    good.write_text('{"text": "fine", "stars": 5.0}\n{"text": "bad", "stars": 1}\n')
    rows = read_labelled_corpus(good, label_field="stars")
    assert [r.label for r in rows] == ["5", "1"]
    assert label_names(rows, None) == ["1", "5"]
    with pytest.raises(ValueError, match=r"r.jsonl:1: label '5' is not in data.labels"):
        label_names(rows, ["1", "2"])
    bad = tmp_path / "b.jsonl"
    bad.write_text('{"text": "fine", "label": "pos"}\n{"text": "", "label": "neg"}\n')
    with pytest.raises(ValueError, match=r"b.jsonl:2: field 'text' is missing or empty"):
        read_labelled_corpus(bad)
    table = tmp_path / "t.tsv"
    table.write_text("sentence\tlabel\nfine\t1\n")
    with pytest.raises(
        ValueError, match=r"t.tsv:1: the header \['sentence', 'label'\] has no 'text'"
    ):
        read_labelled_corpus(table)
    assert read_labelled_corpus(table, text_field="sentence")[0].text == "fine"
