"""The generated bilingual setting (data_specs/xlm_gain): deterministic, two vocabularies that
share no token, parallel sentences aligned word for word, task dev words unseen in training."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fixtures import load_script
from ptm_multilingual import SharedBPETokenizer, read_monolingual_corpora, read_parallel_corpora
from ptm_multilingual.finetune import read_language_tsv

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "data_specs" / "xlm_gain"


gen = load_script(HERE / "make_data.py", "xlm_gain_make_data")
LEX = gen.build_lexicon()
KIND = {w: "person" for w in gen.PERSONS} | {w: "animal" for w in gen.ANIMALS}


def rows(name: str) -> list[tuple[str, str]]:
    lines = (HERE / "task" / name).read_text(encoding="utf-8").splitlines()
    return [(label, text) for label, text in (line.split("\t") for line in lines)]


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    assert gen.build_lexicon() == LEX
    assert gen.make_tasks() == gen.make_tasks()
    first = [s.a for s in gen.corpus(1, 50)]
    assert first == [s.a for s in gen.corpus(1, 50)]
    assert first != [s.a for s in gen.corpus(2, 50)]


def test_committed_files_are_the_generators_output(tmp_path: Path) -> None:
    gen.write_tasks(tmp_path / "task")
    gen.write_lexicon(tmp_path / "lexicon.tsv")
    gen.write_corpora(tmp_path / "sample", 0, 200, 100)
    for path in [*(tmp_path / "task").iterdir(), *(tmp_path / "sample").rglob("*.t*")]:
        committed = HERE / path.relative_to(tmp_path)
        assert committed.read_text(encoding="utf-8") == path.read_text(encoding="utf-8"), path
    assert (HERE / "lexicon.tsv").read_text() == (tmp_path / "lexicon.tsv").read_text()


def test_vocabularies_disjoint_down_to_characters_and_bpe_pieces() -> None:
    assert len(set(LEX.values())) == len(LEX)  # a bijection
    chars_a = {c for w in LEX for c in w}
    chars_b = {c for w in LEX.values() for c in w}
    assert not chars_a & chars_b
    corpora = read_monolingual_corpora(HERE / "sample" / "mono")
    assert set(corpora) == {"xa", "xb"}
    for lang, words in (("xa", set(LEX)), ("xb", set(LEX.values()))):
        used = {w for line in corpora[lang] for w in line.split()}
        assert used <= words, used - words
    tokenizer = SharedBPETokenizer.train(corpora, vocab_size=600)
    ids = {
        lang: {i for line in lines for i in tokenizer.encode(line)}
        for lang, lines in corpora.items()
    }
    assert not ids["xa"] & ids["xb"]


def test_parallel_sentences_are_aligned_word_for_word() -> None:
    adjectives = set(gen.PERSON_ADJ + gen.ANIMAL_ADJ + gen.SHARED_ADJ)
    verbs = set(gen.SHARED_VERBS + gen.PERSON_VERBS_T + gen.PERSON_VERBS_I)
    verbs |= set(gen.ANIMAL_VERBS_T + gen.ANIMAL_VERBS_I)
    for order in gen.ORDERS:
        for sentence in gen.corpus(3, 300, order):
            a, align = sentence.a, sentence.align
            assert sorted(align) == list(range(len(a)))
            assert sentence.b == tuple(LEX[a[i]] for i in align)
            # xb puts every adjective after its noun; xa before.
            for k, i in enumerate(align):
                if a[i] in adjectives:
                    assert a[i + 1] in KIND or a[i + 1] in gen.THINGS
                    assert align[k - 1] == i + 1
            if order == "mild":  # only adjective and noun swap
                assert [w for w in (a[i] for i in align) if w not in adjectives] == [
                    w for w in a if w not in adjectives
                ]
            else:  # sov: the verb last, prepositions after their noun phrase
                assert a[align[-1]] in verbs
                if a[-3] in gen.PREPS or (len(a) > 3 and a[-4] in gen.PREPS):
                    assert a[align[-2]] in gen.PREPS
    with pytest.raises(ValueError, match="order='svo'; use one of mild, sov"):
        gen.realise(["the", "dog"], "saw", [], [], LEX, "svo")
    (corpus,) = read_parallel_corpora(HERE / "sample" / "parallel")
    assert (corpus.source_lang, corpus.target_lang) == ("xa", "xb")
    for a, b in corpus.pairs:
        assert sorted(LEX[w] for w in a.split()) == sorted(b.split())


def test_task_labels_follow_the_subject_and_dev_words_are_unseen_in_training() -> None:
    train = rows("train.xa.tsv")
    train_words = {w for _, text in train for w in text.split()}
    assert not train_words & set(LEX.values())  # fine-tuning never sees an xb word
    heldout = set(gen.nouns("person", "heldout") + gen.nouns("animal", "heldout"))
    assert not train_words & heldout
    for name in ("train.xa", "dev.xa", "dev_heldout.xa", "val.xa"):
        got = rows(f"{name}.tsv")
        for label, text in got:
            first_noun = next(w for w in text.split() if w in KIND)
            assert label == KIND[first_noun], text
        assert sum(label == "person" for label, _ in got) * 2 == len(got)
    dev_words = {w for _, text in rows("dev_heldout.xa.tsv") for w in text.split()}
    assert {w for w in dev_words if w in KIND} <= heldout
    for split in ("dev", "dev_heldout", "val"):
        a, b = rows(f"{split}.xa.tsv"), rows(f"{split}.xb.tsv")
        assert [label for label, _ in a] == [label for label, _ in b]
        for (_, text_a), (_, text_b) in zip(a, b, strict=True):
            assert sorted(LEX[w] for w in text_a.split()) == sorted(text_b.split())
    examples, names = read_language_tsv(HERE / "task" / "train.xa.tsv")
    assert names == ["animal", "person"] and len(examples) == 240


def test_a_bag_of_words_does_not_decide_the_task() -> None:
    # Half the objects are persons or animals: counting kinds is often a tie or wrong.
    ties = 0
    for _, text in rows("train.xa.tsv"):
        kinds = [KIND[w] for w in text.split() if w in KIND]
        ties += len(kinds) == 2 and kinds[0] != kinds[1]
    assert ties >= 40


def test_no_task_sentence_in_the_corpora() -> None:
    tasks = {s.a for split in gen.make_tasks().values() for _, s in split}
    assert not tasks & {s.a for s in gen.corpus(1, 3000)}
    sample = (HERE / "sample" / "mono" / "xa.txt").read_text(encoding="utf-8").splitlines()
    assert not {" ".join(t) for t in tasks} & set(sample)


@pytest.mark.parametrize("kind", ["person", "animal"])
def test_the_corpus_shows_each_nouns_kind(kind: str) -> None:
    own = set(
        gen.PERSON_VERBS_T + gen.PERSON_VERBS_I
        if kind == "person"
        else gen.ANIMAL_VERBS_T + gen.ANIMAL_VERBS_I
    )
    other = set(
        gen.ANIMAL_VERBS_T + gen.ANIMAL_VERBS_I
        if kind == "person"
        else gen.PERSON_VERBS_T + gen.PERSON_VERBS_I
    )
    seen = {w: 0 for w in gen.nouns(kind)}
    for sentence in gen.corpus(1, 4000):
        subject = next(w for w in sentence.a if w in KIND)
        if KIND[subject] == kind:
            seen[subject] += sentence.a[sentence.a.index(subject) + 1] in own
            assert not set(sentence.a) & other
    assert min(seen.values()) >= 5  # every noun, both halves, in contexts of its kind
