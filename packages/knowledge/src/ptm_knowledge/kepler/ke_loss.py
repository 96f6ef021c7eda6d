"""KEPLER's knowledge-embedding loss (TransE form) and its negative sampling.

Wang et al. (2021), "KEPLER: A Unified Model for Knowledge Embedding and Pre-trained
Language Representation", eq. (2)-(3), with the TransE score of Bordes et al. (2013):

.. math::

    d_r(h, t) = \\lVert h + r - t \\rVert_p

    L_{KE} = -\\log \\sigma(\\gamma - d_r(h, t))
             - \\frac{1}{n} \\sum_{i=1}^{n} \\log \\sigma(d_r(h'_i, t'_i) - \\gamma)

where each negative ``(h'_i, r, t'_i)`` replaces the head or the tail of the true triple.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def transe_distance(heads: Tensor, relations: Tensor, tails: Tensor, p: float = 1.0) -> Tensor:
    """``||h + r - t||_p`` over the last dimension.

    Args:
        heads, relations, tails: broadcastable ``(..., D)`` embeddings.
        p: the norm.

    Returns:
        ``(...)`` distances.
    """
    return torch.linalg.vector_norm(heads + relations - tails, ord=p, dim=-1)


def ke_loss(positive: Tensor, negative: Tensor, margin: float) -> Tensor:
    """KEPLER's KE loss from distances, averaged over the batch.

    Args:
        positive: ``(B,)`` distances ``d_r(h, t)`` of the true triples.
        negative: ``(B, n)`` distances ``d_r(h'_i, t'_i)`` of their negatives.
        margin: ``gamma``.

    Returns:
        0-d loss: ``mean_b[-log s(gamma - d_b) - 1/n sum_i log s(d'_bi - gamma)]``.
    """
    if negative.dim() != 2 or negative.shape[0] != positive.shape[0]:
        raise ValueError(
            f"negative distances must be (B, n) with B={positive.shape[0]}, "
            f"got {tuple(negative.shape)}"
        )
    true_part = -F.logsigmoid(margin - positive)  # (B,)
    false_part = -F.logsigmoid(negative - margin).mean(dim=1)  # (B,)
    return (true_part + false_part).mean()


def corrupt_triples(
    heads: Tensor,
    tails: Tensor,
    num_entities: int,
    num_negatives: int,
    generator: torch.Generator,
    *,
    head_prob: float = 0.5,
) -> tuple[Tensor, Tensor]:
    """Negatives that replace either the head or the tail of each triple (never both).

    The replacing entity is drawn uniformly from the entities other than the one it
    replaces, so a negative never equals its true triple.

    Args:
        heads, tails: ``(B,)`` entity indices of the true triples.
        num_entities: entities to draw from (at least 2).
        num_negatives: ``n`` negatives per triple.
        generator: the seeded source of randomness.
        head_prob: chance that a negative replaces the head.

    Returns:
        ``(negative_heads, negative_tails)``, both ``(B, n)``; in each negative exactly one
        of them differs from the true triple.
    """
    if num_entities < 2:
        raise ValueError(f"negative sampling needs at least 2 entities, got {num_entities}")
    shape = (heads.shape[0], num_negatives)
    replace_head = torch.rand(shape, generator=generator) < head_prob
    original = torch.where(replace_head, heads[:, None], tails[:, None])
    # Uniform over the other num_entities - 1 entities: skip the original index.
    drawn = torch.randint(num_entities - 1, shape, generator=generator)
    drawn = drawn + (drawn >= original).long()
    negative_heads = torch.where(replace_head, drawn, heads[:, None])
    negative_tails = torch.where(replace_head, tails[:, None], drawn)
    return negative_heads, negative_tails
