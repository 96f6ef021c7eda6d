"""Generation scores through the maintained libraries: sacrebleu (BLEU) and Google's
rouge-score (ROUGE-1/2/L F1).

rouge-score's default tokenizer keeps only ``[a-z0-9]`` and would score every non-Latin
sentence as empty, so ROUGE here splits on whitespace (after lowercasing): language
neutral, and the same units BLEU's ``13a`` tokenizer sees for space-separated text. Scores
are percentages (0-100).
"""

from __future__ import annotations

from collections.abc import Sequence

from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


class WhitespaceTokenizer:
    """rouge-score's tokenizer interface: lowercase, split on whitespace."""

    def tokenize(self, text: str) -> list[str]:
        return text.lower().split()


def generation_scores(
    hypotheses: Sequence[str],
    references: Sequence[str],
    *,
    bleu_tokenize: str = "13a",
    bleu_max_order: int = 4,
) -> dict[str, float]:
    """Corpus BLEU and mean ROUGE F1 of ``hypotheses`` against one reference each.

    Args:
        hypotheses: generated texts.
        references: one reference per hypothesis.
        bleu_tokenize: sacrebleu's tokenizer (``13a``; ``intl``, ``char``, ``zh`` for
            other scripts).
        bleu_max_order: longest n-gram of BLEU (4: BLEU-4). Corpus BLEU-4 is 0 whenever
            no hypothesis has a 4-gram, so targets of three words or fewer need 2.

    Returns:
        ``bleu``, ``rouge1``, ``rouge2``, ``rougeL`` (percentages) and ``count``.

    Raises:
        ValueError: the lists differ in length or are empty.
    """
    if len(hypotheses) != len(references):
        raise ValueError(
            f"{len(hypotheses)} hypotheses but {len(references)} references; give one each"
        )
    if not hypotheses:
        raise ValueError("no hypotheses to score")
    metric = BLEU(tokenize=bleu_tokenize, lowercase=True, max_ngram_order=bleu_max_order)
    bleu = metric.corpus_score(list(hypotheses), [list(references)])
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), tokenizer=WhitespaceTokenizer())
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for hypothesis, reference in zip(hypotheses, references, strict=True):
        scores = scorer.score(reference, hypothesis)
        for name in ROUGE_TYPES:
            totals[name] += scores[name].fmeasure
    result = {"bleu": float(bleu.score), "count": float(len(hypotheses))}
    result |= {name: 100.0 * total / len(hypotheses) for name, total in totals.items()}
    return result


__all__ = ["ROUGE_TYPES", "WhitespaceTokenizer", "generation_scores"]
