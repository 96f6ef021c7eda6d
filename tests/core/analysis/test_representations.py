"""Linear CKA against its closed forms and a brute-force HSIC; anisotropy on vectors with
and without a shared direction (statistical)."""

from __future__ import annotations

import pytest
import torch

from ptm_core.analysis.representations import (
    anisotropy,
    cka_matrix,
    hsic,
    linear_cka,
    linear_cka_gram,
    sample_cross_sentence_pairs,
)


def _random(n: int, p: int, seed: int) -> torch.Tensor:
    return torch.randn(n, p, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_cka_is_one_under_orthogonal_maps_and_isotropic_scaling() -> None:
    x = _random(40, 6, 0)
    q, _ = torch.linalg.qr(_random(6, 6, 1))
    assert linear_cka(x, x @ q) == pytest.approx(1.0, abs=1e-10)
    assert linear_cka(x, 3.7 * x) == pytest.approx(1.0, abs=1e-10)
    assert linear_cka(x, x + 5.0) == pytest.approx(1.0, abs=1e-10)  # centring
    # not invariant to an arbitrary invertible map
    stretch = torch.diag(torch.tensor([10.0, 1, 1, 1, 1, 0.1], dtype=torch.float64))
    assert linear_cka(x, x @ stretch) < 0.9


def test_cka_feature_form_equals_gram_form_and_brute_force_hsic() -> None:
    x, y = _random(12, 5, 2), _random(12, 3, 3)
    n = x.shape[0]
    k, l_ = x @ x.T, y @ y.T

    def brute_hsic(a: torch.Tensor, b: torch.Tensor) -> float:
        h = [[(1.0 if i == j else 0.0) - 1.0 / n for j in range(n)] for i in range(n)]
        ha = [[sum(h[i][m] * float(a[m, j]) for m in range(n)) for j in range(n)] for i in range(n)]
        hb = [[sum(h[i][m] * float(b[m, j]) for m in range(n)) for j in range(n)] for i in range(n)]
        return sum(ha[i][j] * hb[j][i] for i in range(n) for j in range(n)) / (n - 1) ** 2

    assert hsic(k, l_) == pytest.approx(brute_hsic(k, l_), rel=1e-9)
    expected = brute_hsic(k, l_) / (brute_hsic(k, k) * brute_hsic(l_, l_)) ** 0.5
    assert linear_cka_gram(x, y) == pytest.approx(expected, rel=1e-9)
    assert linear_cka(x, y) == pytest.approx(expected, rel=1e-9)
    assert 0.0 < expected < 1.0


def test_cka_matrix_and_bad_shapes() -> None:
    a = [_random(30, 4, s) for s in range(3)]
    matrix = cka_matrix(a, a[:2])
    assert matrix.shape == (3, 2)
    assert matrix[0, 0] == pytest.approx(1.0) and matrix[1, 1] == pytest.approx(1.0)
    assert matrix[2, 0] < 0.5  # independent random matrices
    with pytest.raises(ValueError, match="same n examples"):
        linear_cka(a[0], a[1][:10])


def test_anisotropy_of_isotropic_and_of_shared_direction_vectors() -> None:
    g = torch.Generator().manual_seed(0)
    n, d = 600, 64
    sentence_of = torch.arange(n) // 10
    isotropic = torch.randn(n, d, generator=g)
    shared = torch.randn(n, d, generator=g) + 4.0 * torch.ones(d)  # a common direction
    result = anisotropy([isotropic, shared], sentence_of, pairs=3000, seed=1)
    # random pairs of isotropic vectors: cosine mean 0, sd 1/sqrt(d); mean of 3000 ~ 0.0023
    assert abs(result.mean[0].item()) < 0.01
    assert result.mean[1].item() > 0.9  # 16 / (16 + 1) in expectation
    assert result.cosines.shape == (2, 3000)
    quantiles = result.quantiles()
    assert quantiles.shape == (2, 5) and (quantiles[:, 1:] >= quantiles[:, :-1]).all()


def test_pairs_never_come_from_one_sentence() -> None:
    sentence_of = torch.tensor([0, 0, 0, 1, 2, 2])
    i, j = sample_cross_sentence_pairs(sentence_of, 500, torch.Generator().manual_seed(0))
    assert len(i) == 500 and (sentence_of[i] != sentence_of[j]).all()
    with pytest.raises(ValueError, match="at least 2 sentences"):
        anisotropy([torch.randn(3, 4)], torch.zeros(3, dtype=torch.long))
