"""Image-text matching accuracy and caption->image retrieval recall@k."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives.base import Batch
from ptm_core.progress import batch_starts
from ptm_core.seeding import generator_for
from ptm_multimodal.data import ImageTextBatches


@dataclass
class MatchingResult:
    """Matching accuracy on balanced pairs (chance = 0.5)."""

    accuracy: float
    num_pairs: int
    chance: float = 0.5


@dataclass
class RetrievalResult:
    """Caption->image retrieval: ``recall[k]`` = fraction of captions whose image ranks in
    the top ``k`` of ``num_images``; ``chance[k] = k / num_images``."""

    recall: dict[int, float]
    chance: dict[int, float]
    num_images: int


#: The objectives whose logits score image-text pairs, in the order they are looked for.
MATCH_OBJECTIVES = ("itm", "align")


@torch.no_grad()
def match_scores(model: PretrainingModel, batch: Batch) -> Tensor:
    """``(B,)`` log-odds that each caption describes its image, from the model's matching
    objective (``itm``, else ``align``).

    Raises:
        ValueError: the model's mix has no matching objective.
    """
    objectives: dict[str, Any] = dict(model.objectives.objectives)
    name = next((n for n in MATCH_OBJECTIVES if n in objectives), None)
    if name is None:
        raise ValueError("no matching objective (itm or align) in this model's mix")
    inputs = {k: batch[k] for k in model.input_keys if k in batch}
    logits = objectives[name].logits(model.encoder(**inputs))
    return (logits[:, 1] - logits[:, 0]).float()


def _scores(
    model: PretrainingModel,
    data: ImageTextBatches,
    images: list[int],
    captions: list[int],
    batch_size: int,
) -> Tensor:
    out = []
    was_training = model.training
    model.eval()
    try:
        for start in batch_starts(len(images), batch_size, "score image-text pairs", "pair"):
            batch = data.build(
                images[start : start + batch_size], captions[start : start + batch_size], None
            )
            out.append(match_scores(model, batch).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out)


def matching_accuracy(
    model: PretrainingModel,
    data: ImageTextBatches,
    *,
    seed: int = 0,
    shuffle_images: bool = False,
    batch_size: int = 64,
) -> MatchingResult:
    """Accuracy of :func:`match_scores` ``> 0`` on one matching and one swapped caption per
    image (balanced, so chance is 0.5).

    Args:
        model: a network and its objectives, one of them ``itm`` or ``align``
            (:func:`~ptm_multimodal.loading.load_multimodal`).
        data: the evaluation pairs (their ``build`` makes unmasked batches).
        seed: picks the swapped captions.
        shuffle_images: feed every caption the regions of a random other image while
            keeping the labels: the control that shows the model uses the image.
        batch_size: pairs per forward pass.
    """
    pairs = data.pairs
    n = len(pairs)
    g = generator_for(seed, "matching")
    negatives = []
    for i in range(n):
        j = int(torch.randint(n, (), generator=g))
        while pairs.caption_key(j) == pairs.caption_key(i):
            j = (j + 1) % n
        negatives.append(j)
    images = list(range(n)) * 2
    captions = list(range(n)) + negatives
    labels = torch.tensor([1] * n + [0] * n)
    if shuffle_images:
        perm = torch.randperm(n, generator=generator_for(seed, "shuffle")).tolist()
        images = [perm[i] for i in images]
    scores = _scores(model, data, images, captions, batch_size)
    accuracy = float(((scores > 0).long() == labels).float().mean())
    return MatchingResult(accuracy=accuracy, num_pairs=2 * n)


def retrieval_recall(
    model: PretrainingModel,
    data: ImageTextBatches,
    *,
    ks: Sequence[int] = (1, 5),
    batch_size: int = 256,
) -> RetrievalResult:
    """Caption->image retrieval over every image of ``data`` (``N * N`` scores).

    Each caption ``i`` is scored against every image; its rank is the number of images
    scoring at least as high as image ``i`` (ties count against it, so a model that gives
    every pair one score gets recall near chance, not 1).
    """
    n = len(data.pairs)
    images = [j for _ in range(n) for j in range(n)]
    captions = [i for i in range(n) for _ in range(n)]
    scores = _scores(model, data, images, captions, batch_size).view(n, n)  # (caption, image)
    true = scores.diagonal()[:, None]
    ranks = (scores >= true).sum(dim=1)  # ties count against the caption
    return RetrievalResult(
        recall={k: float((ranks <= k).float().mean()) for k in ks},
        chance={k: min(1.0, k / n) for k in ks},
        num_images=n,
    )
