"""``ptm evaluate`` for XNLG folders: translate held-out parallel pairs both ways.

A stage-2 (or fine-tuned) XNLG model is told the other side's language and generates
(greedy); BLEU (sacrebleu) and ROUGE-L (rouge-score) against that side. The headline is
``translation/bleu``, the mean BLEU over every pair's two directions: it says whether
the decoder writes the language it is asked for (stage 2's XAE taught it that). Heavy
imports happen inside the scoring function.
"""

from __future__ import annotations

import statistics
from typing import Any

from ptm_core.evaluation.kinds import reinitialise
from ptm_core.evaluation.registry import Evaluation
from ptm_multilingual import kinds


def score_xnlg(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """BLEU and ROUGE-L of translating every parallel corpus under ``corpus``, both ways."""
    from ptm_core.data.parallel_corpus import read_parallel_corpora
    from ptm_multilingual.tokenizer import SharedBPETokenizer
    from ptm_multilingual.xnlg.generate import score_generation
    from ptm_multilingual.xnlg.model import XNLGModel

    assert corpus is not None  # needs_corpus
    model = XNLGModel.from_pretrained(model_dir).eval()
    if random_init:
        reinitialise(model, seed)
    tokenizer = SharedBPETokenizer.from_directory(model_dir)
    scores: dict[str, Any] = {}
    bleus = []
    for parallel in read_parallel_corpora(corpus):
        a, b = parallel.source_lang, parallel.target_lang
        for l1, l2, pairs in ((a, b, parallel.pairs), (b, a, [(t, s) for s, t in parallel.pairs])):
            got, _ = score_generation(model, tokenizer, pairs, l1, l2)
            scores[f"translation/{l1}-{l2}/bleu"] = got["bleu"]
            scores[f"translation/{l1}-{l2}/rougeL"] = got["rougeL"]
            bleus.append(got["bleu"])
    scores["translation/bleu"] = statistics.fmean(bleus)
    return scores


XNLG = Evaluation(
    name="xnlg",
    metric="translation/bleu",
    higher_is_better=True,
    description="held-out parallel pairs translated both ways (greedy): BLEU, ROUGE-L",
    score=score_xnlg,
    kinds=(kinds.XNLG,),
    needs_corpus="parallel corpus",
    downstream=False,
)

__all__ = ["XNLG", "score_xnlg"]
