"""The evaluations of the model kinds ptm-multimodal owns (its specs' ``evaluation``).

VisualBERT, ViLBERT and LXMERT pre-training ``final/`` folders (image-text matching and
caption->image recall), and fine-tuned VisualBERT/ViLBERT/LXMERT task models. Heavy imports
happen inside the scoring functions.
"""

from __future__ import annotations

from typing import Any

from ptm_core.evaluation.kinds import reinitialise
from ptm_core.evaluation.registry import Evaluation
from ptm_multimodal.kinds import IMAGEBERT, LXMERT, VILBERT, VISUALBERT, VLBERT


def score_multimodal(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """Matching accuracy (and with shuffled images) and caption->image recall@1/5 on the
    image-text pairs directory ``corpus``."""
    from dataclasses import asdict

    from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
    from ptm_multimodal.evaluation import matching_accuracy, retrieval_recall
    from ptm_multimodal.loading import load_multimodal

    assert corpus is not None  # needs_corpus
    data = read_image_text_pairs(corpus)
    # Raises FeatureMismatchError when the pairs' features are not the checkpoint's.
    model, tokenizer = load_multimodal(model_dir, features=data.features.spec)
    if random_init:
        reinitialise(model, seed)
    batches = ImageTextBatches(data, tokenizer, 64, shuffle=False)
    scores: dict[str, Any] = {}
    for name, result in (
        ("matching", matching_accuracy(model, batches, seed=seed)),
        ("matching_shuffled", matching_accuracy(model, batches, seed=seed, shuffle_images=True)),
        ("retrieval", retrieval_recall(model, batches)),
    ):
        for key, value in asdict(result).items():
            if isinstance(value, (int, float)):
                scores[f"{name}/{key}"] = value
    return scores


def score_objectives(
    model_dir: str,
    corpus: str | None,
    seed: int,
    random_init: bool = False,
    *,
    extra_slots: int = 0,
) -> dict[str, Any]:
    """A single-stream model's own pre-training objectives on the image-text pairs
    directory ``corpus`` (every caption its image's own): their losses and accuracies
    averaged over the batches, with the masks drawn from ``seed`` as in pre-training.

    Args:
        extra_slots: output slots after the regions' (VL-BERT: 2).
    """
    import torch

    from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
    from ptm_multimodal.loading import load_multimodal
    from ptm_multimodal.pretraining import GroundedLabels

    assert corpus is not None  # needs_corpus
    data = read_image_text_pairs(corpus)
    model, tokenizer = load_multimodal(model_dir, features=data.features.spec)
    if random_init:
        reinitialise(model, seed)
    model.eval()
    transform = GroundedLabels(
        model.objectives.collate, regions_in_output=True, extra_slots=extra_slots
    )
    batches = ImageTextBatches(
        data, tokenizer, 64, shuffle=False, seed=seed, negative_prob=0.0, transform=transform
    )
    totals: dict[str, float] = {}
    torch.manual_seed(seed)
    with torch.no_grad():
        for index in range(len(batches)):
            for key, value in model(batches.batch(0, index)).metrics.items():
                totals[key] = totals.get(key, 0.0) + float(value)
    return {key: value / len(batches) for key, value in totals.items()}


def score_vlbert(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """VL-BERT's own objectives on ``corpus`` (:func:`score_objectives`): masked LM with
    visual clues and masked RoI classification. VL-BERT has no matching head (the paper
    drops image-text matching), so there is no matching accuracy to report."""
    return score_objectives(model_dir, corpus, seed, random_init, extra_slots=2)


def score_imagebert(
    model_dir: str, corpus: str | None, seed: int, random_init: bool = False
) -> dict[str, Any]:
    """ImageBERT's four objectives on ``corpus``: image-text matching accuracy (one true
    and one swapped caption per image) and caption->image recall (:func:`score_multimodal`),
    then masked LM, masked object classification (``region/moc``) and masked region
    feature regression (``region/mrfr``) on the true pairs (:func:`score_objectives`)."""
    scores = score_multimodal(model_dir, corpus, seed, random_init)
    masked = score_objectives(model_dir, corpus, seed, random_init)
    # Every pair scored by score_objectives is a true one: its matching numbers say nothing.
    scores.update({k: v for k, v in masked.items() if not k.startswith("itm")})
    return scores


def score_multimodal_task(
    model_dir: str, corpus: str | None, seed: int = 0, random_init: bool = False
) -> dict[str, Any]:
    """A fine-tuned VisualBERT/ViLBERT/LXMERT ``final/`` on ``corpus`` (default: its dev file)."""
    from ptm_multimodal.finetune import evaluate_finetuned_image_text

    return evaluate_finetuned_image_text(model_dir, corpus, random_init, seed)


MULTIMODAL = Evaluation(
    name="multimodal",
    metric="matching/accuracy",
    higher_is_better=True,
    description="image-text matching (one true and one swapped caption per image; chance 0.5)",
    score=score_multimodal,
    kinds=(VISUALBERT, VILBERT, LXMERT),
    needs_corpus="image-text pairs directory",
)
MULTIMODAL_TASK = Evaluation(
    name="multimodal_task",
    metric="",  # the task's own (accuracy or VQA accuracy)
    higher_is_better=True,
    description="a fine-tuned VisualBERT/ViLBERT/LXMERT on its image-text task's dev file "
    "(accuracy or VQA accuracy), with its region features",
    score=score_multimodal_task,
    corpus_note="the run's dev file",
)

VLBERT_PRETRAINED = Evaluation(
    name="vlbert",
    metric="mlm/accuracy",
    higher_is_better=True,
    description="VL-BERT's masked LM with visual clues and masked RoI classification on "
    "image-text pairs (no matching head)",
    score=score_vlbert,
    kinds=(VLBERT,),
    needs_corpus="image-text pairs directory",
)

IMAGEBERT_PRETRAINED = Evaluation(
    name="imagebert",
    metric="matching/accuracy",
    higher_is_better=True,
    description="ImageBERT's image-text matching and retrieval, masked LM, masked object "
    "classification and masked region feature regression on image-text pairs",
    score=score_imagebert,
    kinds=(IMAGEBERT,),
    needs_corpus="image-text pairs directory",
)

#: What VisualBERT, ViLBERT and LXMERT folders are scored by (their specs' ``evaluation``): the
#: pre-training final/ and the fine-tuned task model.
EVALUATIONS = (MULTIMODAL, MULTIMODAL_TASK)

__all__ = [
    "EVALUATIONS",
    "MULTIMODAL",
    "MULTIMODAL_TASK",
    "score_multimodal",
    "score_multimodal_task",
]
