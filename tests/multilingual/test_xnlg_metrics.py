"""Generation scores: sacrebleu's BLEU and rouge-score's ROUGE, language-neutral."""

from __future__ import annotations

import pytest
import sacrebleu
from rouge_score import rouge_scorer

from ptm_multilingual.xnlg.metrics import generation_scores


def test_scores_equal_the_libraries_own_numbers() -> None:
    hyps = ["the cat sat on the mat today", "a dog ran far away from home"]
    refs = ["the cat sat on the mat", "a dog ran away from the home"]
    got = generation_scores(hyps, refs)
    assert got["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = sum(scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyps, refs, strict=True))
    assert got["rougeL"] == pytest.approx(100 * expected / 2)
    assert got["count"] == 2


def test_short_targets_need_a_lower_bleu_order() -> None:
    three = ["farmer carried stone", "cow dropped lawyer"]
    assert generation_scores(three, three)["bleu"] == 0.0  # no 4-gram anywhere
    assert generation_scores(three, three, bleu_max_order=2)["bleu"] == pytest.approx(100.0)


def test_rouge_reads_non_latin_scripts() -> None:
    hyps, refs = ["βακαις περουζης φηται"], ["βακαις περουζης"]
    default = rouge_scorer.RougeScorer(["rouge1"]).score(refs[0], hyps[0])["rouge1"].fmeasure
    assert default == 0.0  # rouge-score's own tokenizer keeps only [a-z0-9]
    assert generation_scores(hyps, refs)["rouge1"] == pytest.approx(80.0)


def test_mismatched_lists_are_refused() -> None:
    with pytest.raises(ValueError, match="one each"):
        generation_scores(["a"], [])
    with pytest.raises(ValueError, match="no hypotheses"):
        generation_scores([], [])
