"""Representation analysis: anisotropy per layer and linear CKA between layers.

Ethayarajh (2019), "How Contextual are Contextualized Word Representations?": a layer is
*anisotropic* when its token vectors all point into a narrow cone, so two random tokens from
different sentences already have a high cosine similarity. Its anisotropy is the expected
cosine similarity of such random pairs; any other similarity measured on that layer should
be read against this baseline.

Kornblith et al. (2019), "Similarity of Neural Network Representations Revisited": linear
centred kernel alignment compares two representations ``X (n, p)`` and ``Y (n, q)`` of the
same ``n`` examples,

    CKA(X, Y) = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)      (columns centred)

which equals ``HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` for the linear Gram matrices
``K = X X^T``, ``L = Y Y^T`` and ``HSIC(K, L) = tr(K H L H) / (n - 1)^2``. It is invariant to
orthogonal transforms and isotropic scaling of either side, not to arbitrary linear maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


def _centred(x: Tensor) -> Tensor:
    x = x.double()
    return x - x.mean(dim=0, keepdim=True)


def _check_pair(x: Tensor, y: Tensor) -> None:
    if x.dim() != 2 or y.dim() != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"CKA compares two (n, features) matrices of the same n examples; got "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    if x.shape[0] < 2:
        raise ValueError("CKA needs at least 2 examples")


def linear_cka(x: Tensor, y: Tensor) -> float:
    """Linear CKA of ``x (n, p)`` and ``y (n, q)`` in feature space (cost ``O(n p q)``).

    Returns:
        A value in ``[0, 1]``; 0 when either side is constant.
    """
    _check_pair(x, y)
    xc, yc = _centred(x), _centred(y)
    cross = (yc.T @ xc).square().sum()
    norm = torch.linalg.matrix_norm(xc.T @ xc) * torch.linalg.matrix_norm(yc.T @ yc)
    return 0.0 if norm.item() == 0.0 else float(cross / norm)


def hsic(gram_x: Tensor, gram_y: Tensor) -> float:
    """The biased HSIC estimate ``tr(K H L H) / (n - 1)^2`` of two ``(n, n)`` Gram matrices."""
    n = gram_x.shape[0]
    centring = torch.eye(n, dtype=torch.float64) - 1.0 / n
    k, l_ = gram_x.double(), gram_y.double()
    return float(torch.trace(k @ centring @ l_ @ centring) / (n - 1) ** 2)


def linear_cka_gram(x: Tensor, y: Tensor) -> float:
    """Linear CKA through the Gram matrices (cost ``O(n^2 (p + q))``): the same value as
    :func:`linear_cka`, cheaper when there are fewer examples than features."""
    _check_pair(x, y)
    k, l_ = x.double() @ x.double().T, y.double() @ y.double().T
    denominator = (hsic(k, k) * hsic(l_, l_)) ** 0.5
    return 0.0 if denominator == 0.0 else hsic(k, l_) / denominator


def cka_matrix(first: Sequence[Tensor], second: Sequence[Tensor]) -> Tensor:
    """``(len(first), len(second))`` linear CKA of every pair of layers.

    Args:
        first: one ``(n, p)`` matrix per layer of the first model (rows = the same tokens).
        second: one ``(n, q)`` matrix per layer of the second model.
    """
    out = torch.zeros(len(first), len(second), dtype=torch.float64)
    for i, x in enumerate(first):
        for j, y in enumerate(second):
            n = x.shape[0]
            small = n < max(x.shape[1], y.shape[1])
            out[i, j] = linear_cka_gram(x, y) if small else linear_cka(x, y)
    return out


@dataclass
class Anisotropy:
    """Cosine similarities of random token pairs from different sentences, per layer.

    Attributes:
        mean: ``(layers,)`` anisotropy (Ethayarajh, 2019): the mean cosine similarity.
        cosines: ``(layers, pairs)`` every sampled pair's cosine similarity (the same pairs
            on every layer), for the distribution.
        pairs: pairs sampled.
    """

    mean: Tensor
    cosines: Tensor
    pairs: int

    def quantiles(self, levels: Sequence[float] = (0.05, 0.25, 0.5, 0.75, 0.95)) -> Tensor:
        """``(layers, len(levels))`` quantiles of each layer's cosine similarities."""
        return torch.quantile(self.cosines, torch.tensor(levels, dtype=self.cosines.dtype), dim=1).T


def sample_cross_sentence_pairs(
    sentence_of: Tensor, pairs: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """``pairs`` random token index pairs ``(i, j)`` with tokens from different sentences.

    Args:
        sentence_of: ``(N,)`` the sentence each token comes from.
        pairs: how many pairs.
        generator: the seeded generator.

    Raises:
        ValueError: fewer than two sentences.
    """
    if sentence_of.unique().numel() < 2:
        raise ValueError("anisotropy needs tokens from at least 2 sentences")
    n = sentence_of.numel()
    first, second = [], []
    found = 0
    while found < pairs:
        i = torch.randint(0, n, (2 * (pairs - found),), generator=generator)
        j = torch.randint(0, n, (2 * (pairs - found),), generator=generator)
        keep = sentence_of[i] != sentence_of[j]
        first.append(i[keep])
        second.append(j[keep])
        found += int(keep.sum())
    return torch.cat(first)[:pairs], torch.cat(second)[:pairs]


def anisotropy(
    layers: Sequence[Tensor], sentence_of: Tensor, *, pairs: int = 2000, seed: int = 0
) -> Anisotropy:
    """Mean cosine similarity of random cross-sentence token pairs on every layer.

    Args:
        layers: one ``(N, D)`` matrix of token vectors per layer (rows = the same tokens).
        sentence_of: ``(N,)`` sentence index of each token.
        pairs: pairs sampled (the same on every layer).
        seed: the sampling seed.
    """
    generator = torch.Generator().manual_seed(seed)
    i, j = sample_cross_sentence_pairs(sentence_of, pairs, generator)
    cosines = torch.stack(
        [
            torch.nn.functional.cosine_similarity(h[i].double(), h[j].double(), dim=-1)
            for h in layers
        ]
    )  # (layers, pairs)
    return Anisotropy(mean=cosines.mean(dim=1), cosines=cosines, pairs=pairs)
