"""Pseudo-log-likelihood (ptm_core.analysis.pll) against a brute-force transformers loop on a
tiny Hugging Face BERT, minimal-pair accuracy on hand-built scores, and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from test_lama import SPECIALS, WORDS, _save_bert

from ptm_core.analysis import load_masked_language_model
from ptm_core.analysis.pll import (
    MinimalPair,
    minimal_pair_accuracy,
    pseudo_log_likelihoods,
    read_minimal_pairs,
)

SENTENCES = ["paris is the capital of france .", "marie was born in poland .", "dog ."]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pll") / "bert"
    _save_bert(directory, seed=3)
    return directory


def test_pll_equals_a_brute_force_loop(folder: Path) -> None:
    model = load_masked_language_model(folder)
    reference = transformers.BertForMaskedLM.from_pretrained(folder).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    expected = []
    for sentence in SENTENCES:
        ids = tokenizer(sentence)["input_ids"]
        total = 0.0
        for position in range(1, len(ids) - 1):  # every token but [CLS] and [SEP]
            masked = list(ids)
            masked[position] = tokenizer.mask_token_id
            with torch.no_grad():
                logits = reference(input_ids=torch.tensor([masked])).logits[0, position]
            total += torch.log_softmax(logits, -1)[ids[position]].item()
        expected.append(total)
    ours = pseudo_log_likelihoods(model, SENTENCES, batch_size=4)
    assert ours == pytest.approx(expected, abs=1e-4)


def test_minimal_pair_accuracy_counts_higher_pll(folder: Path) -> None:
    model = load_masked_language_model(folder)
    good, bad = SENTENCES[0], "paris is the capital capital france ."
    scores = pseudo_log_likelihoods(model, [good, bad])
    pairs = [MinimalPair(good, bad, "x"), MinimalPair(bad, good, "x"), MinimalPair(good, good, "y")]
    result = minimal_pair_accuracy(model, pairs)
    assert abs(scores[0] - scores[1]) > 1e-3  # the pair is no tie
    assert result["phenomena"] == {
        "x": {"accuracy": 0.5, "pairs": 2},  # one of the two orders is right
        "y": {"accuracy": 0.0, "pairs": 1},  # a tie is wrong
    }
    assert result["accuracy"] == pytest.approx(1 / 3)
    assert result["scores"][0] == pytest.approx(tuple(scores), abs=1e-4)


def test_minimal_pairs_file_and_cli(folder: Path, tmp_path: Path, capsys) -> None:
    import json

    from flows.cli import main

    sample = Path(__file__).parents[2] / "data_specs" / "minimal_pairs" / "sample.tsv"
    pairs = read_minimal_pairs(sample)
    assert len(pairs) == 68 and {p.phenomenon for p in pairs} == {
        "subject_verb_agreement",
        "determiner_noun_agreement",
        "anaphor_agreement",
    }
    bad = tmp_path / "bad.tsv"
    bad.write_text("good\tbad\nonly one column\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: expected good<TAB>bad"):
        read_minimal_pairs(bad)
    mine = tmp_path / "mine.tsv"
    mine.write_text(
        "# two pairs\nparis is the capital of france .\tparis is the of france .\tword_order\n"
        "marie was born in poland .\tmarie born was in poland .\tword_order\n"
    )
    out = tmp_path / "scores.json"
    assert (
        main(["analyze", str(folder), "minimal-pairs", "--pairs", str(mine), "--output", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| word_order | 2 |" in printed
    record = json.loads(out.read_text())
    assert record["pairs"] == 2 and len(record["scores"]) == 2
    assert main(["analyze", str(folder), "minimal-pairs", "--pairs", str(bad)]) == 1
    assert "bad.tsv:2" in capsys.readouterr().err
    text = tmp_path / "s.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    assert main(["analyze", str(folder), "pll", "--sentences", str(text)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[1] for line in lines] == SENTENCES
    assert SPECIALS and WORDS  # the vocabulary the fixture model was built on
