"""Reading WordNet 3.0 database files: the fixture (a real subset, offsets intact)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from wordnet_paths import FIXTURE

from ptm_knowledge.kg.wordnet import Pointer, WordNetError, read_wordnet, wordnet_directory
from ptm_knowledge.kg.wordnet_files import split_gloss

DOG = "n00004610"


@pytest.fixture(scope="module")
def wordnet():
    return read_wordnet(FIXTURE, pos="nvar")


def test_synsets_in_file_order_with_lexnames(wordnet) -> None:
    assert len(wordnet) == 51
    assert [p for p in ("n", "v", "a", "r") if any(s.id[0] == p for s in wordnet)] == list("nvar")
    assert list(wordnet.synsets)[:3] == ["n00001740", "n00001862", "n00002094"]
    assert {s.lexname for s in wordnet if s.pos == "n"} >= {"noun.animal", "noun.act"}
    assert wordnet["v00001913"].lexname == "verb.body"
    assert wordnet["a00001994"].lexname == "adj.all"


def test_dog_exactly(wordnet) -> None:
    dog = wordnet[DOG]
    assert (dog.pos, dog.lexname, dog.name) == ("n", "noun.animal", "dog")
    assert dog.lemmas == ("dog", "domestic_dog", "Canis_familiaris")
    assert dog.definition.startswith("a member of the genus Canis (probably descended")
    assert dog.definition.endswith("; occurs in many breeds")
    assert dog.examples == ("the dog barked all night",)
    assert dog.pointers == (
        Pointer("@", "hypernym", "n00004221"),
        Pointer("@", "hypernym", "n00003758"),
        Pointer("#m", "member_holonym", "n00004420"),
        Pointer("#m", "member_holonym", "n00006583"),
        Pointer("~", "hyponym", "n00005001"),
        Pointer("~", "hyponym", "n00005112"),
        Pointer("~", "hyponym", "n00005216"),
        Pointer("%p", "has_part", "n00005899"),
    )
    assert wordnet[dog.pointers[0].target].lemmas == ("canine", "canid")


def test_ids_are_byte_offsets(wordnet) -> None:
    for synset in wordnet:
        name = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}[synset.id[0]]
        with (FIXTURE / f"data.{name}").open("rb") as handle:
            handle.seek(int(synset.id[1:]))
            assert handle.read(8).decode() == synset.id[1:]


def test_lexical_pointers_satellites_and_cross_pos(wordnet) -> None:
    dealings = wordnet["n00001740"]
    assert dealings.pointers == (Pointer("+", "derivationally_related_form", "v00003272", 1, 1),)
    assert dealings.pointers[0].lexical and not wordnet[DOG].pointers[0].lexical
    emergent = wordnet["a00001883"]
    assert emergent.pos == "s" and emergent.lemmas == ("emergent", "emerging")
    assert wordnet.satellite_head("a00001883") == wordnet.satellite_head("a00001994")
    head = wordnet.satellite_head("a00001883")
    assert head is not None and wordnet[head].pos == "a" and wordnet[head].lemmas == ("nascent",)
    assert wordnet.satellite_head(DOG) is None
    adverb = wordnet["r00001740"]
    assert [p.relation for p in adverb.pointers] == ["derived_from_adjective"]
    assert [p.relation for p in wordnet["a00002371"].pointers] == ["pertainym"]


def test_every_relation_is_named(wordnet) -> None:
    counts = wordnet.relation_counts()
    assert counts["hypernym"] == counts["hyponym"] == 12
    assert {"verb_group", "also_see", "similar_to", "instance_hypernym", "entailment", "cause",
            "member_of_domain_region", "synset_domain_region_of", "member_of_domain_usage",
            "participle", "attribute", "substance_meronym", "antonym"} <= set(counts)  # fmt: skip


def test_index_senses_and_tag_counts(wordnet) -> None:
    assert wordnet.senses("Dog") == (DOG,)
    assert wordnet.senses("domestic dog", "n") == (DOG,)
    assert wordnet.senses("hyperventilate") == ("v00001913", "v00001740")
    assert wordnet.senses("no such word") == ()
    # cntlist.rev: SemCor tag counts over every sense, whatever the fixture kept.
    assert wordnet.sense_counts("dog") == {"n": 42, "v": 2}
    assert wordnet.sense_counts("fall asleep") == {"v": 8}


def test_nouns_only_and_pointers_out_of_the_pos_read() -> None:
    nouns = read_wordnet(FIXTURE)
    assert nouns.pos == ("n",) and len(nouns) == 32
    assert nouns["n00001740"].pointers[0].target == "v00003272"  # kept, though not read
    assert nouns.senses("deal") == ()


def test_sense_counts_without_cntlist(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "wn")
    (tmp_path / "wn" / "cntlist.rev").unlink()
    assert read_wordnet(tmp_path / "wn", pos="nv").sense_counts("hyperventilate") == {"v": 2}


def test_lexnames_file_is_used_when_present(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "wn")
    names = [f"{i:02d}\tfile{i}\t1" for i in range(45)]
    (tmp_path / "wn" / "lexnames").write_text("\n".join(names) + "\n", encoding="utf-8")
    assert read_wordnet(tmp_path / "wn")[DOG].lexname == "file5"


def test_split_gloss() -> None:
    assert split_gloss('a tail; "the flag waved"; "he wagged"') == (
        "a tail",
        ("the flag waved", "he wagged"),
    )
    assert split_gloss("slang for something (the `smack')") == (
        "slang for something (the `smack')",
        (),
    )
    assert split_gloss('"hello"') == ("", ("hello",))


def _corrupt(tmp_path: Path, name: str, old: str, new: str) -> Path:
    folder = tmp_path / "wn"
    shutil.copytree(FIXTURE, folder)
    text = (folder / name).read_text(encoding="utf-8")
    assert old in text
    (folder / name).write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


def _line_of(path: Path, needle: str) -> int:
    lines = path.read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("00005001 05 n 05 pooch", "00005002 05 n 05 pooch", "synset_offset"),
        ("00005001 05 n 05 pooch", "00005001 05 n 0Z pooch", "w_cnt"),
        (
            "00005112 05 n 03 cur 0 mongrel 0 mutt 0 001 @",
            "00005112 05 n 03 cur 0 mongrel 0 mutt 0 003 @",
            "p_cnt",
        ),
        ("00005899 05 n 01 flag 0 001 #p", "00005899 05 n 01 flag 0 001 #q", "pointer_symbol"),
        (
            "00005216 05 n 01 hunting_dog 0 002 @ 00004610",
            "00005216 05 n 01 hunting_dog 0 002 @ 00004611",
            "pointer",
        ),
        ("00005899 05 n 01 flag", "00005899 05 v 01 flag", "ss_type"),
        (
            "00005899 05 n 01 flag 0 001 #p 00004610 n 0000 |",
            "00005899 05 n 01 flag 0 001 #p 00004610 n 0000 ",
            "gloss",
        ),
    ],
)
def test_malformed_data_line_names_file_and_line(
    tmp_path: Path, old: str, new: str, field: str
) -> None:
    folder = _corrupt(tmp_path, "data.noun", old, new)
    number = _line_of(folder / "data.noun", new)
    with pytest.raises(WordNetError) as info:
        read_wordnet(folder)
    message = str(info.value)
    assert message.startswith(f"{folder / 'data.noun'}:{number}: ")
    assert f"(field '{field}')" in message and "\n" not in message


def test_index_naming_an_unknown_synset(tmp_path: Path) -> None:
    folder = _corrupt(tmp_path, "index.noun", "1 00004610", "1 00004611")
    with pytest.raises(WordNetError, match=r"index\.noun:\d+: 'dog' names synset 00004611"):
        read_wordnet(folder)


def test_missing_directory_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WNSEARCHDIR", str(tmp_path / "nowhere"))
    with pytest.raises(WordNetError) as info:
        read_wordnet()
    message = str(info.value)
    assert str(tmp_path / "nowhere") in message and "$WNSEARCHDIR" in message
    assert "apt-get install wordnet-base" in message and "\n" not in message
    monkeypatch.setenv("WNSEARCHDIR", str(FIXTURE))
    assert wordnet_directory() == FIXTURE
    shutil.copytree(FIXTURE, tmp_path / "wn")
    (tmp_path / "wn" / "index.verb").unlink()
    with pytest.raises(WordNetError, match=r"index\.verb: file not found"):
        read_wordnet(tmp_path / "wn", pos="nv")


def test_unknown_part_of_speech() -> None:
    with pytest.raises(ValueError, match="unknown part of speech"):
        read_wordnet(FIXTURE, pos=("x",))


def test_real_database_tests_fail_on_ci_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wordnet_paths

    monkeypatch.setattr(wordnet_paths, "SYSTEM", tmp_path / "absent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"CI: .* is missing"):
        wordnet_paths.system_wordnet()
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception, match="apt-get install wordnet-base"):
        wordnet_paths.system_wordnet()
