"""Linear-chain CRF against brute-force enumeration of every tag sequence."""

from __future__ import annotations

import itertools

import pytest
import torch

from ptm_core.heads.crf import LinearChainCRF, bio_transition_mask

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def brute_force(
    crf: LinearChainCRF, emissions: torch.Tensor, length: int
) -> dict[tuple[int, ...], float]:
    """Score of every tag sequence of one row (emissions ``(W, T)``), by the definition."""
    transitions, start, end = (s.detach().double() for s in crf.scores())
    emissions = emissions.double()
    scores = {}
    for seq in itertools.product(range(crf.num_tags), repeat=length):
        s = start[seq[0]] + end[seq[-1]] + sum(emissions[t, seq[t]] for t in range(length))
        s = s + sum(transitions[seq[t - 1], seq[t]] for t in range(1, length))
        scores[seq] = float(s)
    return scores


def random_case(
    seed: int, num_tags: int, width: int, lengths: list[int]
) -> tuple[LinearChainCRF, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    crf = LinearChainCRF(num_tags)
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0.0, 1.0)  # far from the small init, so transitions matter
    emissions = torch.randn(len(lengths), width, num_tags) * 2
    mask = torch.arange(width).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return crf, emissions, mask


@pytest.mark.parametrize(
    ("seed", "num_tags", "width", "lengths"),
    [(0, 2, 4, [4, 1, 3]), (1, 3, 5, [5, 2, 4, 1]), (2, 4, 3, [3, 3]), (3, 3, 6, [6, 5, 2])],
)
def test_partition_likelihood_and_viterbi_equal_brute_force(
    seed: int, num_tags: int, width: int, lengths: list[int]
) -> None:
    crf, emissions, mask = random_case(seed, num_tags, width, lengths)
    log_z = crf.log_partition(emissions, mask).detach()
    best = crf.decode(emissions, mask)
    gold = torch.randint(0, num_tags, (len(lengths), width))
    log_likelihood = crf.log_likelihood(emissions, gold, mask).detach()
    for row, length in enumerate(lengths):
        scores = brute_force(crf, emissions[row], length)
        expected_log_z = torch.logsumexp(
            torch.tensor(list(scores.values()), dtype=torch.float64), 0
        )
        assert float(log_z[row]) == pytest.approx(float(expected_log_z), abs=1e-4)
        gold_seq = tuple(int(x) for x in gold[row, :length])
        assert float(log_likelihood[row]) == pytest.approx(
            scores[gold_seq] - float(expected_log_z), abs=1e-4
        )
        argmax = max(scores, key=scores.__getitem__)
        assert tuple(best[row, :length].tolist()) == argmax
        assert (best[row, length:] == -100).all()
    # Probabilities of all sequences sum to one.
    assert float(
        torch.logsumexp(torch.tensor(list(brute_force(crf, emissions[0], lengths[0]).values())), 0)
        - log_z[0]
    ) == pytest.approx(0.0, abs=1e-4)


def test_padding_content_does_not_matter() -> None:
    crf, emissions, mask = random_case(5, 3, 5, [2, 5])
    noisy = emissions.clone()
    noisy[0, 2:] = torch.randn(3, 3) * 100
    tags = torch.randint(0, 3, (2, 5))
    noisy_tags = tags.clone()
    noisy_tags[0, 2:] = 2
    torch.testing.assert_close(
        crf.log_likelihood(noisy, noisy_tags, mask), crf.log_likelihood(emissions, tags, mask)
    )
    assert torch.equal(crf.decode(noisy, mask), crf.decode(emissions, mask))


def test_empty_rows_score_zero() -> None:
    crf, emissions, mask = random_case(6, 3, 4, [0, 3])
    crf.requires_grad_(False)
    assert float(crf.log_partition(emissions, mask)[0]) == 0.0
    assert float(crf.log_likelihood(emissions, torch.zeros(2, 4, dtype=torch.long), mask)[0]) == 0.0
    assert (crf.decode(emissions, mask)[0] == -100).all()


def test_gradients_are_finite_and_reach_every_parameter() -> None:
    torch.manual_seed(0)
    crf = LinearChainCRF(len(TAGS), tag_names=TAGS, constraint="bio")
    emissions = torch.randn(3, 6, len(TAGS), requires_grad=True)
    mask = torch.arange(6).unsqueeze(0) < torch.tensor([[6], [3], [1]])
    tags = torch.tensor([[1, 2, 0, 3, 4, 4], [0, 0, 1, 0, 0, 0], [3, 0, 0, 0, 0, 0]])
    loss = -crf.log_likelihood(emissions, tags, mask).mean()
    loss.backward()
    assert torch.isfinite(loss)
    for grad in (
        emissions.grad,
        crf.transitions.grad,
        crf.start_transitions.grad,
        crf.end_transitions.grad,
    ):
        assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    # No gradient flows into the padded emissions.
    assert emissions.grad is not None and (emissions.grad[1, 3:] == 0).all()


def test_bio_mask_allows_i_only_after_b_or_i_of_the_same_type() -> None:
    allowed, allowed_start = bio_transition_mask(TAGS)
    index = {name: i for i, name in enumerate(TAGS)}
    assert not allowed[index["O"], index["I-PER"]]
    assert not allowed[index["B-LOC"], index["I-PER"]]
    assert not allowed[index["I-LOC"], index["I-PER"]]
    assert allowed[index["B-PER"], index["I-PER"]] and allowed[index["I-PER"], index["I-PER"]]
    assert allowed[index["O"], index["B-PER"]] and allowed[index["I-PER"], index["O"]]
    assert allowed_start.tolist() == [True, True, False, True, False]
    assert int((~allowed).sum()) == 2 * 3  # each I-X: from O, from the other type's B and I
    with pytest.raises(ValueError, match="S-PER"):
        bio_transition_mask(["O", "S-PER"])


def test_bio_constraint_forbids_o_to_i_in_decoding_and_likelihood() -> None:
    crf = LinearChainCRF(len(TAGS), tag_names=TAGS, constraint="bio")
    emissions = torch.full((1, 3, len(TAGS)), -5.0)
    emissions[0, 0, 0] = 5.0  # O
    emissions[0, 1, 2] = 5.0  # I-PER strongly preferred after O ...
    emissions[0, 1, 1] = 4.0  # ... B-PER a bit less
    emissions[0, 2, 2] = 5.0
    mask = torch.ones(1, 3, dtype=torch.bool)
    unconstrained = LinearChainCRF(len(TAGS))
    unconstrained.load_state_dict(crf.state_dict())
    assert unconstrained.decode(emissions, mask).tolist() == [[0, 2, 2]]
    assert crf.decode(emissions, mask).tolist() == [[0, 1, 2]]
    forbidden = crf.log_likelihood(emissions, torch.tensor([[0, 2, 2]]), mask).detach()
    assert float(forbidden.exp()) == 0.0 and torch.isfinite(forbidden)
    starts_inside = crf.log_likelihood(emissions, torch.tensor([[2, 2, 2]]), mask).detach()
    assert float(starts_inside.exp()) == 0.0
    # Random emissions never decode to a forbidden transition.
    torch.manual_seed(0)
    allowed, allowed_start = bio_transition_mask(TAGS)
    paths = crf.decode(torch.randn(64, 7, len(TAGS)) * 3, torch.ones(64, 7, dtype=torch.bool))
    assert allowed_start[paths[:, 0]].all()
    assert allowed[paths[:, :-1], paths[:, 1:]].all()
    with pytest.raises(ValueError, match="tag_names"):
        LinearChainCRF(3, constraint="bio")
