"""LAMA through K-BERT's sentence trees: the probed triple never reaches its own tree,
injection off equals the plain masked-LM path on the same weights, and the CLI compares a
K-BERT with its injection-off ablation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_lama import SPECIALS, WORDS, _kg, _save_bert, _write_kg

from ptm_core.analysis import load_masked_language_model
from ptm_knowledge.kbert import knowledge_from_graph
from ptm_knowledge.kg.graph import Entity, KnowledgeGraph, Triple
from ptm_knowledge.probing import (
    TreeInjection,
    build_statements,
    load_templates,
    score_lama,
    statement_trees,
)
from ptm_knowledge.probing.models import load_probe_model

VOCAB = {w: i for i, w in enumerate(SPECIALS + WORDS)}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("kbert_lama") / "bert"
    _save_bert(directory)
    return directory


def _injection(kg: KnowledgeGraph, max_entities: int = 2) -> TreeInjection:
    return TreeInjection(knowledge_from_graph(kg), "kg", max_entities=max_entities)


def test_the_probed_triple_never_appears_in_its_own_tree(folder: Path) -> None:
    model = load_masked_language_model(folder)
    kg = _kg()
    statements = build_statements(kg, model, load_templates()).statements
    trees = statement_trees(model, statements, kg, _injection(kg))
    assert trees.counts["statements"] == len(statements) == 8
    # every probed fact is in the branch KG under its subject, and would have been a branch
    assert trees.counts["own_triple_in_kg"] == trees.counts["own_triple_removed"] == 8
    for statement, branches in zip(statements, trees.branches, strict=True):
        relation = statement.relation.replace("_", " ").strip()
        answer = statement.answer.lower()
        assert f"{relation} {answer}" not in branches, (statement.text, branches)
    # Rome keeps its other fact (Atlantis is [UNK] for this vocabulary, yet still a branch)
    rome = statements.index(next(s for s in statements if s.subject_id == "rome"))
    assert trees.branches[rome] == ["capital of [UNK]"]
    # Marie's other citizenship stays: it is another fact, not the probed one
    marie = [i for i, s in enumerate(statements) if s.subject_id == "marie"]
    assert [trees.branches[i] for i in marie] == [["citizen of france"], ["citizen of poland"]]
    assert trees.counts["answer_in_branches"] == 0
    assert trees.counts["retokenized"] == 0


def test_without_the_exclusion_the_answer_would_leak(folder: Path) -> None:
    """A hand-built case: Paris' own branch "capital of France" hands over the answer."""
    model = load_masked_language_model(folder)
    kg = KnowledgeGraph(
        [Entity("paris", "Paris"), Entity("france", "France")],
        [Triple("paris", "capital_of", "france")],
    )
    statements = build_statements(kg, model, load_templates()).statements
    assert [s.text for s in statements] == ["Paris is the capital of [MASK] ."]
    leaky = statement_trees(model, statements, kg, _injection(kg), exclude_own_triple=False)
    clean = statement_trees(model, statements, kg, _injection(kg))
    assert "france" in leaky.tokens[0] and leaky.branches == [["capital of france"]]
    assert "france" not in clean.tokens[0] and clean.branches == [[]]
    assert clean.counts["own_triple_removed"] == 1
    assert leaky.counts["answer_in_branches"] == 1
    # the trunk token [MASK] sees Paris' branch: the answer is one attention step away
    mask = leaky.mask_positions[0]
    france = leaky.tokens[0].index("france")
    tokens = leaky.tokens[0]
    paris = tokens.index("paris")
    assert leaky.visibility[0][paris, france] and leaky.visibility[0][mask, paris]
    assert not leaky.visibility[0][mask, france]  # only the subject sees its branch


def test_injection_off_equals_the_plain_masked_lm(folder: Path) -> None:
    model = load_masked_language_model(folder)
    kg = _kg()
    made = build_statements(kg, model, load_templates())
    statements = made.statements
    off = statement_trees(model, statements, kg, TreeInjection({}, "none"))
    assert off.ids == [list(s.ids) for s in statements]
    assert off.mask_positions == [s.mask_position for s in statements]
    assert off.counts["branches"] == off.counts["with_branches"] == 0
    plain = model.log_probs([s.ids for s in statements], [s.mask_position for s in statements])
    tree = model.log_probs(
        off.ids,
        off.mask_positions,
        position_ids=off.soft_positions,
        visibility=off.visibility,
        batch_size=3,  # padding inside a batch, visibility padded too
    )
    assert torch.allclose(plain, tree, atol=1e-5)
    a, b = score_lama(model, made), score_lama(model, made, trees=off)
    assert a.ranks.tolist() == b.ranks.tolist() and a.top == b.top
    # with branches the inputs differ and so do the scores
    on = statement_trees(model, statements, kg, _injection(kg))
    assert on.counts["with_branches"] >= 3
    scored = model.log_probs(
        on.ids, on.mask_positions, position_ids=on.soft_positions, visibility=on.visibility
    )
    assert not torch.allclose(plain, scored, atol=1e-3)
    first = next(i for i, b in enumerate(on.branches) if b)
    assert on.visibility[first].shape == (len(on.ids[first]),) * 2
    assert not on.visibility[first].all()  # branches hidden from the rest of the sentence


def test_a_kbert_classifier_folder_is_refused_with_the_folder_to_probe(tmp_path: Path) -> None:
    final = tmp_path / "final"
    final.mkdir()
    (final / "config.json").write_text("{}")
    (final / "task.json").write_text(
        json.dumps(
            {"recipe": "kbert", "provenance": {"init_from": "runs/bert/final", "kg_path": "kg/"}}
        )
    )
    with pytest.raises(ValueError, match=r"masked LM runs/bert/final .* --kg kg/ --kbert"):
        load_probe_model(final)


def test_ptm_analyze_lama_kbert_against_injection_off(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.cli import main

    kg = _write_kg(tmp_path / "kg")
    out = tmp_path / "analysis"
    argv = ["analyze", str(folder), "lama", "--kg", str(kg), "--output", str(out), "--kbert"]
    assert main([*argv, "--ablate-knowledge"]) == 0
    printed = capsys.readouterr().out
    assert "8 statements had their own triple removed" in printed
    assert "(K-BERT, injection off)" in printed and "McNemar" in printed
    record = json.loads((out / "lama.json").read_text())
    trees = record["summary"]["sentence_trees"]
    assert trees["own_triple_removed"] == 8 and trees["kg"] == str(kg)
    assert record["compare_summary"]["sentence_trees"]["branches"] == 0
    assert record["comparison"]["overall"]["n"] == 8
    paris = next(s for s in record["statements"] if s["subject"] == "paris")
    assert paris["branches"] == []
    assert (
        main(
            [
                "analyze",
                str(folder),
                "lama",
                "--kg",
                str(kg),
                "--output",
                "x",
                "--kbert-kg",
                str(kg),
            ]
        )
        == 2
    )
    assert "add --kbert" in capsys.readouterr().err
