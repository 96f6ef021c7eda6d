"""``ptm evaluate`` on a SentiLARE folder (kind ``sentilr``): the ``sentilr`` family's
``evaluation``.

On a held-out labelled corpus (the pre-training format): the label-aware MLM with every row
a late-supervision row, so the review label is predicted from ``[CLS]`` with the label input
"unknown" (``sentilr/label_accuracy``, the headline), and the masked words' tokens, POS and
polarity (``sentilr/{token,pos,polarity}_accuracy``). Heavy imports happen inside.
"""

from __future__ import annotations

from typing import Any

from ptm_core.evaluation.registry import Evaluation
from ptm_text.families import SENTILR_KIND


def score_sentilr(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Mean metrics over the corpus's batches (32 rows each, masking seeded by ``seed``)."""
    from pathlib import Path

    import torch

    from ptm_core.data.batches import PretrainingBatches
    from ptm_core.evaluation.kinds import reinitialise
    from ptm_core.families import get
    from ptm_core.models.pretraining import PretrainingModel
    from ptm_core.objectives.inputs import build_objective
    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.pretraining import load_heads
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_text.sentilr.checkpoint import load_sentilr
    from ptm_text.sentilr.data import LabelledExamples, label_names, read_labelled_corpus
    from ptm_text.sentilr.objective import LabelAwareMLMObjective
    from ptm_text.sentilr.pretraining import annotator_from

    assert corpus is not None  # needs_corpus
    network = load_sentilr(model_dir).eval()
    record = network.record
    texts = read_labelled_corpus(
        corpus,
        text_field=str(record.get("text_field", "text")),
        label_field=str(record.get("label_field", "label")),
    )
    labels = label_names(texts, record["labels"])
    tokenizer = WordPieceTokenizer.from_directory(model_dir)
    vocab = tokenizer.vocab_info
    objective = build_objective(LabelAwareMLMObjective, network, vocab, late_supervision_prob=1.0)
    mix = ObjectiveMix({"sentilr": objective})
    load_heads(mix, Path(model_dir))
    if random_init:
        reinitialise(network, seed)
        reinitialise(objective, seed)
    examples = LabelledExamples(texts, labels, tokenizer, annotator_from(record), 128)
    batches = PretrainingBatches(
        examples, 32, pad_id=vocab.pad_id, transform=mix.collate, seed=seed, shuffle=False
    )
    model = PretrainingModel(network, mix, input_keys=get("sentilr").input_keys).eval()
    sums: dict[str, float] = {}
    count = 0
    with torch.inference_mode():
        for index in range(batches.batches_per_epoch):
            out = model(batches.batch(0, index))
            for key, value in out.metrics.items():
                if key.endswith("accuracy") or key.endswith("_loss"):
                    sums[key] = sums.get(key, 0.0) + float(value)
            count += 1
    scores: dict[str, Any] = {key: value / count for key, value in sorted(sums.items())}
    scores["texts"] = len(examples)
    return scores


SENTILR = Evaluation(
    name="sentilr",
    metric="sentilr/label_accuracy",
    higher_is_better=True,
    description="review label from [CLS] with the label input unknown, and the masked "
    "words' token/POS/polarity accuracy, on a held-out labelled corpus",
    score=score_sentilr,
    kinds=(SENTILR_KIND,),
    needs_corpus="held-out labelled corpus (.jsonl or .tsv, the pre-training format)",
)

__all__ = ["SENTILR", "score_sentilr"]
