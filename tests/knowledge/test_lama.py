"""LAMA probes (ptm_knowledge.probing): templates, single-token filtering, filtered ranks
by hand, and parity with a direct transformers computation on a Hugging Face BERT folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from ptm_core.analysis import load_masked_language_model
from ptm_knowledge.kg.graph import Entity, KnowledgeGraph, Triple
from ptm_knowledge.probing import (
    TemplateError,
    build_statements,
    compare_lama,
    derived_template,
    load_templates,
    score_lama,
)
from ptm_knowledge.probing.lama import filtered_ranks, rank_metrics
from ptm_knowledge.probing.statements import MULTI_TOKEN, UNKNOWN_TOKEN

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "paris",
    "france",
    "rome",
    "italy",
    "berlin",
    "germany",
    "madrid",
    "spain",
    "is",
    "the",
    "capital",
    "of",
    "a",
    "citizen",
    "marie",
    "curie",
    "poland",
    "was",
    "born",
    "in",
    ".",
    "speaks",
    "french",
    "new",
    "york",
    "usa",
    "lives",
    "kind",
    "dog",
    "animal",
    "cat",
]
ENTITIES = [
    ("paris", "Paris"),
    ("france", "France"),
    ("rome", "Rome"),
    ("italy", "Italy"),
    ("berlin", "Berlin"),
    ("germany", "Germany"),
    ("madrid", "Madrid"),
    ("spain", "Spain"),
    ("marie", "Marie"),
    ("poland", "Poland"),
    ("nyc", "New York"),
    ("usa", "USA"),
    ("atlantis", "Atlantis"),
    ("dog", "dog"),
    ("cat", "cat"),
    ("animal", "animal"),
]
TRIPLES = [
    ("paris", "capital_of", "france"),
    ("rome", "capital_of", "italy"),
    ("berlin", "capital_of", "germany"),
    ("madrid", "capital_of", "spain"),
    ("marie", "citizen_of", "poland"),
    ("marie", "citizen_of", "france"),
    ("usa", "speaksLanguage", "nyc"),  # a two-token object: dropped
    ("rome", "capital_of", "atlantis"),  # not in the vocabulary: [UNK], dropped
    ("dog", "_hypernym", "animal"),
    ("cat", "_hypernym", "animal"),
]


def _kg() -> KnowledgeGraph:
    return KnowledgeGraph(
        [Entity(i, name) for i, name in ENTITIES], [Triple(h, r, t) for h, r, t in TRIPLES]
    )


def _tokenizer() -> transformers.BertTokenizer:
    vocab = {token: i for i, token in enumerate(SPECIALS + WORDS)}
    return transformers.BertTokenizer(vocab=vocab, do_lower_case=True)


def _save_bert(directory: Path, seed: int = 0) -> transformers.BertForMaskedLM:
    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(SPECIALS) + len(WORDS),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=40,
    )
    model = transformers.BertForMaskedLM(config)
    g = torch.Generator().manual_seed(seed + 5)
    with torch.no_grad():  # off the init so a lost tensor or a wrong norm shows
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn(parameter.shape, generator=g))
    model.save_pretrained(directory)
    _tokenizer().save_pretrained(directory)
    return model.eval()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("lama") / "bert"
    _save_bert(directory)
    return directory


def test_derived_templates_and_yaml_overrides(tmp_path: Path) -> None:
    assert derived_template("born_in") == "[X] born in [Y] ."
    assert derived_template("speaksLanguage") == "[X] speaks language [Y] ."
    assert derived_template("_hypernym") == "[X] hypernym [Y] ."
    file = tmp_path / "t.yaml"
    file.write_text('born_in: "[X] came into the world in [Y] ."\nnew_rel: "[Y] has [X] ."\n')
    templates = load_templates(file)
    assert templates["born_in"] == "[X] came into the world in [Y] ."
    assert templates["new_rel"] == "[Y] has [X] ."
    assert templates["_hypernym"] == "[X] is a kind of [Y] ."  # built-ins stay
    file.write_text('born_in: "[X] was born ."\n')
    with pytest.raises(TemplateError, match=r"t\.yaml: template of 'born_in'.*\[Y\]"):
        load_templates(file)
    file.write_text("- a list\n")
    with pytest.raises(TemplateError, match="mapping of relation"):
        load_templates(file)


def test_statements_keep_single_token_objects_and_filter_other_objects(folder: Path) -> None:
    model = load_masked_language_model(folder)
    made = build_statements(_kg(), model, load_templates())
    texts = {s.text for s in made.statements}
    assert "Paris is the capital of [MASK] ." in texts
    assert made.dropped == {
        "speaksLanguage": {MULTI_TOKEN: 1},
        "capital_of": {UNKNOWN_TOKEN: 1},
    }
    assert "speaksLanguage" in made.derived
    citizen = [s for s in made.statements if s.relation == "citizen_of"]
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    assert [s.object_token for s in citizen] == [vocab["poland"], vocab["france"]]
    assert [s.other_objects for s in citizen] == [(vocab["france"],), (vocab["poland"],)]
    # a sample of one triple per relation still filters the subject's other object
    one = build_statements(_kg(), model, load_templates(), max_per_relation=1, seed=3)
    (kept,) = [s for s in one.statements if s.relation == "citizen_of"]
    assert len(kept.other_objects) == 1
    with pytest.raises(ValueError, match="have no triple in the KG"):
        build_statements(_kg(), model, load_templates(), relations=["born_in"])


def test_rank_metrics_by_hand() -> None:
    metrics = rank_metrics(np.array([1, 2, 11]))
    assert metrics == pytest.approx(
        {"n": 3, "p@1": 1 / 3, "p@10": 2 / 3, "mrr": (1 + 1 / 2 + 1 / 11) / 3}
    )
    from ptm_knowledge.probing.statements import ClozeStatement

    scores = torch.tensor([[0.0, 5.0, 4.0, 3.0, 9.0], [0.0, 1.0, 2.0, 3.0, 4.0]])

    def statement(token: int, others: tuple[int, ...]) -> ClozeStatement:
        return ClozeStatement("r", "s", "o", "", "", (), 0, token, other_objects=others)

    # row 0: id 4 is special (excluded), id 1 is another object (filtered): 3 is below 2
    # only -> rank 2; row 1: object 1, ids 2 and 3 score higher, 4 excluded -> rank 3.
    ranks, _ = filtered_ranks(scores, [statement(3, (1,)), statement(1, ())], [0, 4])
    assert ranks.tolist() == [2, 3]


def test_ranks_equal_a_direct_transformers_fill_mask(folder: Path) -> None:
    model = load_masked_language_model(folder)
    made = build_statements(_kg(), model, load_templates())
    result = score_lama(model, made)
    reference = transformers.BertForMaskedLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    special = tokenizer.all_special_ids
    expected = []
    for statement in made.statements:
        encoded = tokenizer(statement.text, return_tensors="pt")
        assert encoded["input_ids"][0].tolist() == list(statement.ids)
        position = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        with torch.no_grad():
            logits = reference(**encoded).logits[0, position]
        ours = model.log_probs([statement.ids], [statement.mask_position])[0]
        torch.testing.assert_close(ours, torch.log_softmax(logits, -1), atol=1e-5, rtol=0)
        logits[special + list(statement.other_objects)] = float("-inf")
        gold = logits[statement.object_token]
        expected.append(1 + int((logits > gold).sum()))
    assert result.ranks.tolist() == expected
    assert result.metrics()["p@1"] == np.mean(np.array(expected) == 1)
    summary = result.summary()
    assert set(summary["relations"]) == {"capital_of", "citizen_of", "_hypernym"}
    assert summary["overall"]["p@1"] == pytest.approx(
        np.mean([summary["relations"][r]["p@1"] for r in summary["relations"]])
    )


def test_compare_pairs_statements_and_tests_the_difference(folder: Path, tmp_path: Path) -> None:
    model = load_masked_language_model(folder)
    first = score_lama(model, build_statements(_kg(), model, load_templates()))
    same = compare_lama(first, first)
    assert same["overall"]["p@1_difference"] == 0.0
    assert same["overall"]["mcnemar_p"] == 1.0
    _save_bert(tmp_path / "other", seed=1)
    other_model = load_masked_language_model(tmp_path / "other")
    other = score_lama(other_model, build_statements(_kg(), other_model, load_templates()))
    diff = compare_lama(first, other)
    hits = (other.ranks == 1).mean() - (first.ranks == 1).mean()
    assert diff["overall"]["p@1_difference"] == pytest.approx(hits)
    low, high = diff["overall"]["p@1_difference_ci95"]
    assert low <= diff["overall"]["p@1_difference"] <= high


def test_seen_facts_are_marked(folder: Path) -> None:
    model = load_masked_language_model(folder)
    seen = {("paris", "capital_of", "france")}
    made = build_statements(_kg(), model, load_templates(), seen=seen)
    flags = {s.key: s.seen for s in made.statements}
    assert flags[("paris", "capital_of", "france")] is True
    assert flags[("rome", "capital_of", "italy")] is False
    summary = score_lama(model, made).summary()
    assert summary["seen"]["n"] == 1 and summary["unseen"]["n"] == len(made.statements) - 1


def test_a_folder_without_an_mlm_head_is_refused(tmp_path: Path) -> None:
    from ptm_core.analysis.masked_lm_model import NoMaskedLMHeadError

    model = _save_bert(tmp_path / "bert")
    model.bert.save_pretrained(tmp_path / "bare")  # BertModel: no MLM head
    _tokenizer().save_pretrained(tmp_path / "bare")
    with pytest.raises(NoMaskedLMHeadError, match="bare: no trained masked-LM head"):
        load_masked_language_model(tmp_path / "bare")


def _write_kg(directory: Path) -> Path:
    directory.mkdir()
    (directory / "entities.tsv").write_text(
        "id\tname\ttype\taliases\tdescription\n"
        + "".join(f"{i}\t{name}\t\t\t\n" for i, name in ENTITIES)
    )
    (directory / "triples.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in TRIPLES))
    return directory


def test_ptm_analyze_lama_writes_the_report_and_compares(
    folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from flows.cli import main

    kg = _write_kg(tmp_path / "kg")
    _save_bert(tmp_path / "other", seed=1)
    out = tmp_path / "analysis"
    argv = [str(folder), "lama", "--kg", str(kg), "--output", str(out)]
    assert main(["analyze", *argv, "--compare", str(tmp_path / "other")]) == 0
    printed = capsys.readouterr().out
    assert "| capital_of | [X] is the capital of [Y] . | 4 |" in printed
    assert "McNemar" in printed and f"report: {out}/lama.md" in printed
    record = json.loads((out / "lama.json").read_text())
    assert record["summary"]["overall"]["n"] == 8
    assert record["comparison"]["overall"]["n"] == 8
    assert (out / "lama_relations.png").read_bytes()[:4] == b"\x89PNG"
    # the folder is ptm's now: a second run needs --overwrite, a user's folder is never replaced
    assert main(["analyze", *argv]) == 1
    assert "--overwrite" in capsys.readouterr().err
    assert main(["analyze", *argv, "--overwrite", "--relations", "_hypernym"]) == 0
    assert json.loads((out / "lama.json").read_text())["summary"]["overall"]["n"] == 2
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    assert (
        main(
            ["analyze", str(folder), "lama", "--kg", str(kg), "--output", str(mine), "--overwrite"]
        )
        == 1
    )
    assert (mine / "notes.txt").read_text() == "keep"


def test_holdout_kg_keeps_probe_facts_out_of_training(folder: Path, tmp_path: Path) -> None:
    import json

    from flows.cli import main

    kg = _write_kg(tmp_path / "kg")
    rows = [f"{h}\t{r}\t{t}\n" for h, r, t in TRIPLES]
    (kg / "train.tsv").write_text("".join(rows[:-2]))  # a pre-split KG (WN18RR-style)
    (kg / "valid.tsv").write_text(rows[-2])
    (kg / "test.tsv").write_text(rows[-1])
    held = tmp_path / "held"
    argv = [str(folder), "lama", "--kg", str(kg), "--relations", "capital_of,citizen_of"]
    assert main(["analyze", *argv, "--output", str(tmp_path / "a"), "--holdout-kg", str(held)]) == 0
    probe = {
        tuple(line.split("\t")) for line in (held / "probe_facts.tsv").read_text().splitlines()
    }
    assert len(probe) == 6 and ("paris", "capital_of", "france") in probe
    train = {tuple(line.split("\t")) for line in (held / "train.tsv").read_text().splitlines()}
    test = {tuple(line.split("\t")) for line in (held / "test.tsv").read_text().splitlines()}
    assert not probe & train and probe <= test
    assert (held / "triples.tsv").read_text() == (kg / "triples.tsv").read_text()
    out = tmp_path / "b"
    assert (
        main(["analyze", *argv, "--output", str(out), "--seen-triples", str(held / "train.tsv")])
        == 0
    )
    summary = json.loads((out / "lama.json").read_text())["summary"]
    assert summary["seen"]["n"] == 0 and summary["unseen"]["n"] == 6


def test_models_that_read_entities_get_the_subject_on_its_first_piece(folder: Path) -> None:
    """ERNIE-THU's alignment: the subject entity on the first piece of the subject's name."""
    model = load_masked_language_model(folder)
    seen: list[torch.Tensor] = []
    text_encoder = model.encoder

    class Recording(torch.nn.Module):
        def forward(self, *args: object, entity_ids: torch.Tensor, **kwargs: object) -> object:
            seen.append(entity_ids)
            return text_encoder(*args, **kwargs)

    model.encoder = Recording()
    model.entity_index = {"marie": 7, "paris": 3}
    made = build_statements(
        _kg(), model, {"citizen_of": "a citizen of [Y] is [X] ."}, relations=["citizen_of"]
    )
    result = score_lama(model, made)
    tokens = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    rows = torch.cat(seen)
    for row, statement in zip(rows, made.statements, strict=True):
        assert statement.ids[statement.subject_position] == tokens["marie"]
        expected = torch.full_like(row, -1)
        expected[statement.subject_position] = 7
        assert torch.equal(row[: len(statement.ids)], expected[: len(statement.ids)])
    assert result.summary()["statements_with_subject_entity"] == 2
