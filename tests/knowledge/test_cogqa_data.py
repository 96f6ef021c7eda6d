"""CogQA data: the 2-hop bridge-question generator and the HotpotQA-format reader."""

from __future__ import annotations

import json

import pytest

from ptm_knowledge.cogqa.data import (
    entity_paragraphs,
    generate_bridge_questions,
    read_hotpot_json,
    write_hotpot_json,
)
from ptm_knowledge.cogqa.evaluation import normalize_answer
from ptm_knowledge.cogqa.examples import MultiHopDataError
from ptm_knowledge.cogqa.training import gold_chain


def test_paragraphs_state_descriptions_and_triples(sample_kg):
    paragraphs = entity_paragraphs(sample_kg)
    title, sentences, facts = paragraphs["marie_curie"]
    assert title == "Marie Curie"
    assert sentences[0].startswith("Marie Curie : Polish-born physicist")
    assert "Marie Curie was born in Warsaw ." in sentences
    assert facts[sentences.index("Marie Curie was born in Warsaw .")] == ("born_in", "warsaw")


def test_generator_is_deterministic_and_gold_facts_form_a_chain(sample_kg):
    first = generate_bridge_questions(sample_kg, num_questions=30, seed=3)
    again = generate_bridge_questions(sample_kg, num_questions=30, seed=3)
    other = generate_bridge_questions(sample_kg, num_questions=30, seed=4)
    assert [e.to_json() for e in first] == [e.to_json() for e in again]
    assert [e.to_json() for e in first] != [e.to_json() for e in other]
    assert len({e.id for e in first}) == 30
    for ex in first:
        assert len(ex.context) == 6  # 2 gold + 4 distractors
        chain = gold_chain(ex)
        assert chain is not None, ex.id
        t1, i1, t2, i2 = chain
        assert t1 in ex.question and t2 not in ex.question
        assert t2 in ex.paragraph(t1)[i1]
        assert normalize_answer(ex.answer) in normalize_answer(ex.paragraph(t2)[i2])
        assert normalize_answer(ex.answer) not in normalize_answer(ex.question)


def test_generator_adds_hard_distractors(sample_kg):
    # A distractor sharing the second relation states "<X> <verb2> <Y>" too (when another
    # entity of the KG has that relation at all, e.g. not for the one "is operated by").
    examples = generate_bridge_questions(sample_kg, num_questions=40, seed=0)
    with_hard = 0
    for ex in examples:
        verb2 = ex.question.split(" something that ")[1].removesuffix(" what ?")
        t1, _, t2, _ = gold_chain(ex)
        with_hard += any(
            t not in (t1, t2) and any(f" {verb2} " in x for x in s) for t, s in ex.context
        )
    assert with_hard >= 0.9 * len(examples)


def test_hotpot_json_round_trip(sample_kg, tmp_path):
    examples = generate_bridge_questions(sample_kg, num_questions=5, seed=0)
    path = write_hotpot_json(examples, tmp_path / "dev.json")
    back = read_hotpot_json(path)
    assert [e.to_json() for e in back] == [e.to_json() for e in examples]


def _record(**over):
    record = {
        "_id": "q1",
        "question": "Where?",
        "answer": "Paris",
        "supporting_facts": [["A", 0]],
        "context": [["A", ["A is in Paris."]]],
    }
    record.update(over)
    return record


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (_record(answer=3), "'answer'"),
        (_record(context=[["A", "not a list"]]), "'context[0]'"),
        (_record(supporting_facts=[["A", 5]]), "'supporting_facts[0]'"),
        (_record(supporting_facts=[["A"]]), "'supporting_facts[0]'"),
    ],
)
def test_reader_names_file_line_and_field(tmp_path, record, field):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([_record(_id="ok"), record], indent=1), encoding="utf-8")
    with pytest.raises(MultiHopDataError) as err:
        read_hotpot_json(path)
    message = str(err.value)
    assert str(path) in message and field in message and "Fix:" in message
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if '"q1"' in t)
    assert f"line {line}" in message


def test_reader_reports_json_syntax_position(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n{"_id": "q1",\n "question": }\n]', encoding="utf-8")
    with pytest.raises(MultiHopDataError, match=r"broken\.json:3:"):
        read_hotpot_json(path)
