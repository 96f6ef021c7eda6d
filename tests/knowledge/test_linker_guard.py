"""The linker's guard (no function words, no adjective -> noun links), context ranking,
and the legacy switch set reproducing the linker before #38."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
from knowledge_sample_paths import CORPUS
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example

from ptm_core.data import iter_text_corpus
from ptm_knowledge.kg import Entity, KnowledgeGraph, Triple
from ptm_knowledge.linking import EntityLinker, NounShare
from ptm_knowledge.linking.linker import LEGACY_SETTINGS
from ptm_knowledge.linking.noun_share import NounShareError

LEGACY = Path(__file__).parent / "data" / "legacy_links.json"

# A lexical KG in the shape of WordNet's noun KG: function words and adjectives are also
# names of noun senses ("a" the letter, "in" the inch, "wild" the wilderness).
ENTITIES = [
    Entity("letter_a", "a", ("A",), "noun.communication", "the 1st letter of the alphabet"),
    Entity("inch", "inch", ("in",), "noun.quantity", "a unit of length equal to 1/12 foot"),
    Entity("one", "one", ("1", "ace"), "noun.quantity", "the smallest whole number"),
    Entity("two", "two", ("2",), "noun.quantity", "the cardinal number after one"),
    Entity("are", "are", ("ar",), "noun.quantity", "a unit of surface area equal to 100 m2"),
    Entity("being", "being", ("beingness",), "noun.state", "the state of existing"),
    Entity("wilderness", "wilderness", ("wild",), "noun.location", "a wild uninhabited region"),
    Entity("last", "last", (), "noun.quantity", "a unit of capacity for grain"),
    Entity("out", "out", (), "noun.act", "a baseball play in which a batter is retired"),
    Entity("horse", "horse", (), "noun.animal", "a hoofed mammal ridden or used to pull carts"),
    Entity("train", "train", (), "noun.artifact", "railway cars pulled by a locomotive"),
    Entity("station", "station", (), "noun.artifact", "a stop where trains halt"),
    Entity("bank_river", "bank", (), "noun.object", "sloping land beside a river or lake"),
    Entity("bank_money", "bank", ("depository",), "noun.group", "a company that keeps money"),
    Entity("river", "river", (), "noun.object", "a large natural stream of water"),
    Entity("loan", "loan", (), "noun.possession", "money lent at interest"),
    Entity("the_who", "The Who", ("Who",), "band", "an English rock band"),
    Entity("asian", "Asian", (), "noun.person", "a native or inhabitant of Asia"),
]
TRIPLES = [
    Triple("bank_river", "_hypernym", "river"),
    Triple("bank_money", "_related", "loan"),
    Triple("train", "_related", "station"),
]
FUNCTION_WORDS = {"a", "in", "one", "are", "being", "two", "out", "last", "A", "In", "One"}


@pytest.fixture(scope="module")
def lexical_kg() -> KnowledgeGraph:
    return KnowledgeGraph(ENTITIES, TRIPLES)


@pytest.fixture(scope="module")
def linker(lexical_kg: KnowledgeGraph) -> EntityLinker:
    return EntityLinker(lexical_kg)


def _linked(linker: EntityLinker, text: str) -> list[tuple[str, str]]:
    return [(m.text, m.entity_id) for m in linker.link(text)]


@pytest.mark.parametrize(
    "text",
    [
        "A horse is standing in a field with one or two foals.",
        "There are two trains, being late, at the station in the morning.",
        "In 1900 one horse and a train went out; the last one was late.",
    ],
)
def test_no_function_words(linker: EntityLinker, text: str) -> None:
    linked = _linked(linker, text)
    assert not [t for t, _ in linked if t in FUNCTION_WORDS], linked
    # the nouns are still there: the guard did not drop everything
    assert {"horse", "train", "station"} & {t for t, _ in linked}


def test_the_legacy_linker_did_link_function_words(lexical_kg: KnowledgeGraph) -> None:
    # what the guard is for: the same sentence through the pre-#38 settings
    old = EntityLinker(lexical_kg, **LEGACY_SETTINGS)
    linked = {t for t, _ in _linked(old, "A horse is standing in a field with one or two foals.")}
    assert {"A", "in", "a", "one", "two"} <= linked


@pytest.mark.parametrize(
    ("text", "adjective"),
    [
        ("a wild horse ran across the plain", "wild"),
        ("the last train leaves at noon", "last"),
        ("he went out to see the horse", "out"),
    ],
)
def test_no_adjective_or_adverb_links(linker: EntityLinker, text: str, adjective: str) -> None:
    linked = _linked(linker, text)
    assert adjective not in {t for t, _ in linked}, linked
    assert ("horse" in text) <= (("horse", "horse") in linked)


def test_noun_use_of_a_verb_heavy_word_is_linked_in_a_noun_phrase(linker: EntityLinker) -> None:
    # "wild" has a noun share of ~0.02, but "into the wild." ends a noun phrase
    assert ("wild", "wilderness") in _linked(linker, "The horse escaped into the wild.")


def test_proper_adjective_is_not_a_person(linker: EntityLinker) -> None:
    assert "Asian" not in dict(_linked(linker, "It was formerly an Asian soviet."))
    assert ("Asian", "asian") in _linked(linker, "She met an Asian who lives in Asia.")


def test_capitalised_name_passes_mid_sentence_only(linker: EntityLinker) -> None:
    assert ("The Who", "the_who") in _linked(linker, "Tonight The Who play in London.")
    # "Who" is a stop word: a name mid-sentence, a question word at the start
    assert ("Who", "the_who") in _linked(linker, "We saw Who at the festival.")
    assert _linked(linker, "Who is there?") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We had a picnic on the bank of the river and watched the water.", "bank_river"),
        ("She asked the bank for a loan to buy a house.", "bank_money"),
    ],
)
def test_context_picks_the_sense(linker: EntityLinker, text: str, expected: str) -> None:
    assert dict(_linked(linker, text))["bank"] == expected


def test_ambiguous_alias_without_context_is_nil(linker: EntityLinker) -> None:
    assert "bank" not in dict(_linked(linker, "It was a bank."))


def test_noun_share_file_and_errors(lexical_kg: KnowledgeGraph, tmp_path: Path) -> None:
    prior = tmp_path / "shares.tsv"
    prior.write_text("# comment\nhorse\t0.1\n", encoding="utf-8")
    linker = EntityLinker(lexical_kg, pos_prior=prior)
    assert "horse" not in dict(_linked(linker, "he saw horse tracks"))
    assert NounShare.load(prior).get("HORSE") == pytest.approx(0.1)
    prior.write_text("horse\t1.5\n", encoding="utf-8")
    with pytest.raises(NounShareError, match=r"shares.tsv:1: .*share in \[0, 1\]"):
        NounShare.load(prior)
    with pytest.raises(NounShareError, match=r"no such file.*english"):
        NounShare.load(tmp_path / "missing.tsv")


def test_linker_settings_defaults_are_the_linkers() -> None:
    # the families' typed settings and the configs carry the same defaults as EntityLinker
    import dataclasses
    import inspect

    from ptm_knowledge.kg_corpus_settings import LinkerSettings

    parameters = inspect.signature(EntityLinker).parameters
    for item in dataclasses.fields(LinkerSettings):
        assert getattr(LinkerSettings(), item.name) == parameters[item.name].default, item.name
    from omegaconf import OmegaConf

    root = Path(__file__).resolve().parents[2] / "configs"
    block = OmegaConf.load(root / "data" / "kg_sample.yaml").linker
    assert dict(block) == dataclasses.asdict(LinkerSettings())
    # ERNIE-THU fine-tuning links with the same object, not a copy
    finetune = OmegaConf.load(root / "experiment" / "ernie_thu_finetune_tiny.yaml").ernie_finetune
    assert OmegaConf.to_container(finetune, resolve=False)["linker"] == "${data.linker}"


def test_bad_settings_are_named(lexical_kg: KnowledgeGraph) -> None:
    with pytest.raises(ValueError, match="guard must be one of"):
        EntityLinker(lexical_kg, guard="strict")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="disambiguation must be one of"):
        EntityLinker(lexical_kg, disambiguation="embedding")  # type: ignore[arg-type]


# -- tagged pipelines: the guard reads token.pos_ ---------------------------------------

TAGGED = [
    ("a wild horse ran to the train", ["DET", "ADJ", "NOUN", "VERB", "ADP", "DET", "NOUN"]),
    ("the horse went out", ["DET", "NOUN", "VERB", "ADV"]),
    ("they train the horse", ["PRON", "VERB", "DET", "NOUN"]),
    ("the wild is big", ["DET", "NOUN", "AUX", "ADJ"]),
]


@Language.component("test_lookup_pos")
def _lookup_pos(doc: Doc) -> Doc:
    tags = {text: dict(zip(text.split(), pos, strict=True)) for text, pos in TAGGED}[doc.text]
    for token in doc:
        token.pos_ = tags[token.text]
    return doc


def test_guard_reads_pos_from_a_rule_component(lexical_kg: KnowledgeGraph) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("test_lookup_pos")
    linker = EntityLinker(lexical_kg, nlp)
    assert _linked(linker, "they train the horse") == [("horse", "horse")]  # verb "train"
    assert ("wild", "wilderness") in _linked(linker, "the wild is big")  # tagged NOUN
    assert ("wild", "wilderness") not in _linked(linker, "a wild horse ran to the train")


def test_guard_reads_pos_from_a_trained_morphologizer(lexical_kg: KnowledgeGraph) -> None:
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    morphologizer = nlp.add_pipe("morphologizer")
    examples = [Example.from_dict(nlp.make_doc(text), {"pos": pos}) for text, pos in TAGGED]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(60):
        nlp.update(examples, sgd=optimizer)
    doc = nlp("they train the horse")
    assert [t.pos_ for t in doc] == TAGGED[2][1], "the morphologizer did not learn its data"
    linker = EntityLinker(lexical_kg, nlp)
    assert _linked(linker, "they train the horse") == [("horse", "horse")]
    assert "out" not in dict(_linked(linker, "the horse went out"))
    assert morphologizer is nlp.get_pipe("morphologizer")


# -- the pre-#38 linker, reachable by settings ------------------------------------------


@pytest.mark.parametrize("case", ["smart", "insensitive"])
def test_legacy_settings_reproduce_the_old_output_exactly(sample_kg, case: str) -> None:
    recorded = json.loads(LEGACY.read_text(encoding="utf-8"))
    texts = ["\n".join(d.sentences) for d in iter_text_corpus(CORPUS)]
    assert recorded["texts"][: len(texts)] == texts
    linker = EntityLinker(sample_kg, case=case, **LEGACY_SETTINGS)
    got = [
        [[m.start, m.end, m.entity_id, m.score] for m in linker.link(t)] for t in recorded["texts"]
    ]
    assert got == recorded["mentions"][case]


def test_a_record_saved_before_the_guard_links_as_it_did() -> None:
    from ptm_knowledge.linking.linker import saved_linker_options

    before = {"case": "smart", "threshold": 0.3, "prior_weight": 0.5, "context_window": 40}
    assert saved_linker_options(before) == {**LEGACY_SETTINGS, **before}
    assert saved_linker_options(None) == LEGACY_SETTINGS
    now = {"guard": "pos", "threshold": 0.32}
    assert saved_linker_options(now) == now
