"""The evaluation of the model kind ptm-multilingual owns (XLM): the ``xlm`` family's
``evaluation`` (``ptm evaluate`` registers it from the spec, :mod:`ptm_multilingual.families`).

Parallel-sentence retrieval on every parallel corpus under the given one, both
directions. Heavy imports happen inside the scoring function.
"""

from __future__ import annotations

from typing import Any

from ptm_core.evaluation.kinds import reinitialise
from ptm_core.evaluation.registry import Evaluation
from ptm_multilingual import kinds


def score_xlm(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Retrieval accuracy on every parallel corpus under ``corpus``, both directions.

    ``retrieval/mean`` averages every pair's directions (see
    :func:`~ptm_multilingual.evaluation.average_retrieval`).
    """
    from ptm_core.data.parallel_corpus import read_parallel_corpora
    from ptm_multilingual.evaluation import average_retrieval, retrieval_accuracy
    from ptm_multilingual.model import XLMEncoder
    from ptm_multilingual.tokenizer import SharedBPETokenizer

    assert corpus is not None  # needs_corpus
    encoder = XLMEncoder.from_pretrained(model_dir).eval()
    if random_init:
        reinitialise(encoder, seed)
    tokenizer = SharedBPETokenizer.from_directory(model_dir)
    scores: dict[str, Any] = {}
    by_pair: dict[str, dict[str, float]] = {}
    for parallel in read_parallel_corpora(corpus):
        pair = f"{parallel.source_lang}-{parallel.target_lang}"
        by_pair[pair] = retrieval_accuracy(
            encoder, tokenizer, parallel.pairs, parallel.source_lang, parallel.target_lang
        )
        for key, value in by_pair[pair].items():
            scores[f"retrieval/{pair}/{key}"] = value
    scores["retrieval/mean"] = average_retrieval(by_pair)
    return scores


XLM = Evaluation(
    name="xlm",
    metric="retrieval/mean",
    higher_is_better=True,
    description="parallel-sentence retrieval (cosine of mean-pooled states, both directions)",
    score=score_xlm,
    kinds=(kinds.XLM,),
    needs_corpus="parallel corpus",
)

__all__ = ["XLM", "score_xlm"]
