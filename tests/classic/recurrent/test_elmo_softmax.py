"""Sampled softmax: the logQ-corrected estimate converges to the full softmax loss."""

from __future__ import annotations

import math

import pytest
import torch

from ptm_classic.recurrent.softmax import LogUniformSampler, WordSoftmax


def _layer(
    vocab: int = 50, dim: int = 8, **kw: object
) -> tuple[WordSoftmax, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    layer = WordSoftmax(dim, vocab, kind="sampled", **kw)  # type: ignore[arg-type]
    with torch.no_grad():
        layer.bias.normal_()
    return layer, torch.randn(6, dim), torch.tensor([0, 1, 3, 10, 30, 49])


def test_log_uniform_sampler_matches_its_distribution() -> None:
    sampler = LogUniformSampler(20)
    probs = sampler.probability(torch.arange(20))
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-6)
    draws = sampler.sample(200_000, torch.device("cpu"), torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=20).double() / draws.numel()
    se = (probs.double() * (1 - probs.double()) / draws.numel()).sqrt()
    assert ((freq - probs.double()).abs() < 5 * se).all()


def test_all_classes_sampled_is_the_full_softmax() -> None:
    layer, h, y = _layer(num_samples=50)
    layer.train()
    assert not layer.uses_sampling
    torch.testing.assert_close(layer(h, y), layer.full_nll(h, y))


def test_eval_uses_the_full_softmax() -> None:
    layer, h, y = _layer(num_samples=5)
    layer.eval()
    torch.testing.assert_close(layer(h, y), layer.full_nll(h, y))
    layer.train()
    assert not torch.allclose(layer(h, y), layer.full_nll(h, y))


def test_sampled_loss_is_an_unbiased_partition_estimate_and_converges() -> None:
    layer, h, y = _layer(num_samples=10)
    full = layer.full_nll(h, y).detach()
    gen = torch.Generator().manual_seed(1)
    # E[exp(L_sampled)] = exp(L_full): the partition estimate is unbiased.
    draws = torch.stack(
        [layer.sampled_nll(h, y, generator=gen).detach() for _ in range(3000)]
    ).double()
    ratio = torch.exp(draws - full.double())
    mean, se = ratio.mean(0), ratio.std(0) / math.sqrt(ratio.shape[0])
    assert ((mean - 1).abs() < 4 * se + 1e-3).all(), (mean, se)
    # the error shrinks as the number of candidates grows
    errors = []
    for m in (10, 100, 1000, 10000):
        layer.num_samples = m
        err = torch.stack(
            [(layer.sampled_nll(h, y, generator=gen) - full).abs().mean() for _ in range(20)]
        ).mean()
        errors.append(float(err))
    assert errors[0] > errors[1] > errors[2] > errors[3]
    assert errors[-1] < 0.06


def test_without_the_logq_correction_the_estimate_is_biased() -> None:
    layer, h, y = _layer(num_samples=20000)
    full = layer.full_nll(h, y).detach()
    cand = layer.sampler.sample(20000, torch.device("cpu"), torch.Generator().manual_seed(2))
    corrected = layer.sampled_nll(h, y, candidates=cand)
    logits = torch.nn.functional.linear(h, layer.weight[cand], layer.bias[cand])
    hits = cand.unsqueeze(0) == y.unsqueeze(1)
    true = (h * layer.weight[y]).sum(-1) + layer.bias[y]
    naive = (
        torch.logsumexp(torch.cat([true.unsqueeze(1), logits.masked_fill(hits, -math.inf)], 1), 1)
        - true
    )
    assert (corrected - full).abs().max() < 0.1
    assert (naive - full).abs().min() > 3.0


def test_accidental_hits_are_removed() -> None:
    layer, h, y = _layer(num_samples=3)
    only_targets = torch.tensor([0, 0, 0])
    out = layer.sampled_nll(h[:1], y[:1], candidates=only_targets)
    assert out.item() == pytest.approx(0.0, abs=1e-6)


def test_adaptive_softmax_is_exact_and_normalised() -> None:
    torch.manual_seed(0)
    layer = WordSoftmax(8, 50, kind="adaptive", cutoffs=[10, 30, 80], div_value=2.0)
    h, y = torch.randn(4, 8), torch.tensor([0, 9, 20, 49])
    log_probs = layer.log_probs(h)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(4))
    torch.testing.assert_close(layer(h, y), -log_probs[torch.arange(4), y])


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="full, sampled, adaptive"):
        WordSoftmax(8, 50, kind="hierarchical")
