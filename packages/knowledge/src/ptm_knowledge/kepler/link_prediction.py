"""Link prediction with PyKEEN's rank metrics: filtered setting, realistic ranks.

For each test triple ``(h, r, t)`` the tail is ranked among all candidate entities for
``(h, r, ?)`` and the head among all for ``(?, r, t)``; in the filtered setting every other
entity that makes a known triple (train or test) is left out of the ranking. Ties are
broken as PyKEEN's *realistic* rank: the mean of the optimistic rank
``1 + #{score > true}`` and the pessimistic rank ``#{score >= true}``. MRR, Hits@k and the
mean rank are taken over the head and tail ranks together (PyKEEN's ``both``), so these
numbers compare with :func:`ptm_knowledge.kg.train_kg_embeddings`' ``metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.progress import batch_starts
from ptm_knowledge.kepler.descriptions import EntityDescriptions
from ptm_knowledge.kepler.objective import encode_descriptions

# scores(heads, relations, tails, side) -> (B, N): score of every entity put at ``side``
# ("head" or "tail") of each query triple; higher is more plausible.
Scorer = Callable[[Tensor, Tensor, Tensor, str], Tensor]
HITS_AT = (1, 3, 10)


def realistic_ranks(scores: Tensor, targets: Tensor, excluded: Tensor | None = None) -> Tensor:
    """PyKEEN's realistic rank of each target among the scores.

    Args:
        scores: ``(B, N)`` scores, higher is better.
        targets: ``(B,)`` index of the true entity in each row.
        excluded: ``(B, N)`` bool, options left out of the ranking (filtered setting,
            entities that are no candidates); the target itself is never excluded.

    Returns:
        ``(B,)`` float ranks in ``[1, N]``.
    """
    scores = scores.float()
    rows = torch.arange(len(targets), device=scores.device)
    true = scores[rows, targets][:, None]  # (B, 1)
    if excluded is not None:
        excluded = excluded.clone()
        excluded[rows, targets] = False
        scores = scores.masked_fill(excluded, float("-inf"))
    optimistic = (scores > true).sum(dim=1) + 1
    pessimistic = (scores >= true).sum(dim=1)
    return (optimistic + pessimistic).float() * 0.5


def rank_metrics(ranks: Tensor, hits_at: Sequence[int] = HITS_AT) -> dict[str, float]:
    """MRR, Hits@k and the mean rank of realistic ranks.

    Args:
        ranks: ``(M,)`` ranks (head and tail ranks together for PyKEEN's ``both``).
        hits_at: the ``k`` of Hits@k.

    Returns:
        ``{"mrr", "hits_at_<k>"..., "mean_rank", "num_ranks"}``.
    """
    ranks = ranks.double()
    out = {"mrr": float((1.0 / ranks).mean())}
    for k in hits_at:
        out[f"hits_at_{k}"] = float((ranks <= k).double().mean())
    out["mean_rank"] = float(ranks.mean())
    out["num_ranks"] = float(len(ranks))
    return out


class KnownTriples:
    """Every known ``(h, r, t)`` indexed by ``(h, r)`` and ``(r, t)`` (sorted int64 keys),
    for the filtered setting without a Python set per triple.

    Args:
        triples: ``(K, 3)`` int64 known triples (train and test).
        num_entities, num_relations: index ranges.
    """

    def __init__(self, triples: np.ndarray, num_entities: int, num_relations: int) -> None:
        triples = np.asarray(triples, dtype=np.int64)
        self.num_entities, self.num_relations = num_entities, num_relations
        h, r, t = triples[:, 0], triples[:, 1], triples[:, 2]
        self._tail_keys, self._tails = self._sorted(h * num_relations + r, t)
        self._head_keys, self._heads = self._sorted(r * num_entities + t, h)

    @staticmethod
    def _sorted(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(keys, kind="stable")
        return keys[order], values[order]

    def mask(self, heads: Tensor, relations: Tensor, tails: Tensor, side: str) -> Tensor:
        """``(B, N)`` bool: entities that complete a known triple at ``side`` of each query."""
        h, r, t = (x.cpu().numpy().astype(np.int64) for x in (heads, relations, tails))
        if side == "tail":
            keys, values, query = self._tail_keys, self._tails, h * self.num_relations + r
        else:
            keys, values, query = self._head_keys, self._heads, r * self.num_entities + t
        starts, ends = np.searchsorted(keys, query, "left"), np.searchsorted(keys, query, "right")
        counts = ends - starts
        rows = np.repeat(np.arange(len(query)), counts)
        pieces = [values[s:e] for s, e in zip(starts, ends, strict=True)]
        picks = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        out = torch.zeros(len(query), self.num_entities, dtype=torch.bool)
        out[torch.from_numpy(rows), torch.from_numpy(picks.astype(np.int64))] = True
        return out


def link_prediction_ranks(
    scorer: Scorer,
    test_triples: Tensor | np.ndarray,
    known: KnownTriples,
    *,
    batch_size: int = 256,
    candidates: Tensor | None = None,
    filtered: bool = True,
) -> Tensor:
    """Realistic head and tail ranks of every test triple.

    Args:
        scorer: scores every entity at one side of query triples (:data:`Scorer`).
        test_triples: ``(T, 3)`` triples to rank.
        known: the known triples for the filtered setting.
        batch_size: test triples scored at once.
        candidates: ``(C,)`` entity indices to rank among (default all); the true
            entities must be among them.
        filtered: leave other known true entities out of the ranking.

    Returns:
        ``(2T,)`` ranks: the tail ranks of every triple, then the head ranks.
    """
    triples = torch.as_tensor(np.asarray(test_triples), dtype=torch.long)
    not_candidate = None
    if candidates is not None:
        not_candidate = torch.ones(known.num_entities, dtype=torch.bool)
        not_candidate[candidates] = False
    ranks: dict[str, list[Tensor]] = {"tail": [], "head": []}
    for start in batch_starts(len(triples), batch_size, "rank triples", "triple"):
        chunk = triples[start : start + batch_size]
        h, r, t = chunk[:, 0], chunk[:, 1], chunk[:, 2]
        for side, target in (("tail", t), ("head", h)):
            scores = scorer(h, r, t, side).cpu()
            excluded = known.mask(h, r, t, side) if filtered else None
            if not_candidate is not None:
                excluded = not_candidate.expand_as(scores) | (
                    excluded if excluded is not None else False
                )
            ranks[side].append(realistic_ranks(scores, target, excluded))
    return torch.cat(ranks["tail"] + ranks["head"])


def transe_scorer(entities: Tensor, relations: Tensor, p_norm: float = 1.0) -> Scorer:
    """Scores ``-||h + r - t||_p`` of every entity at the head or tail (via ``cdist``).

    Args:
        entities: ``(N, D)`` entity embeddings.
        relations: ``(R, D)`` relation embeddings.
        p_norm: the norm.
    """

    def score(heads: Tensor, rels: Tensor, tails: Tensor, side: str) -> Tensor:
        r = relations[rels.to(relations.device)]
        if side == "tail":
            query = entities[heads.to(entities.device)] + r  # (B, D): h + r vs every t
        else:
            query = entities[tails.to(entities.device)] - r  # (B, D): t - r vs every h
        return -torch.cdist(query[None], entities[None], p=p_norm)[0]  # (B, N)

    return score


def expected_random_metrics(
    test_triples: Tensor | np.ndarray,
    known: KnownTriples,
    *,
    candidates: Tensor | None = None,
    hits_at: Sequence[int] = HITS_AT,
) -> dict[str, float]:
    """The exact expectation of :func:`rank_metrics` under uniformly random ranking.

    With ``n`` options left for a query after filtering, a random ranking puts the target
    at each rank with probability ``1/n``: ``E[1/rank] = H_n / n``,
    ``P(rank <= k) = min(k, n) / n`` and ``E[rank] = (n + 1) / 2``; the metrics average
    these over the same head and tail queries as :func:`link_prediction_ranks`.

    Args:
        test_triples: ``(T, 3)`` triples.
        known: the known triples (filtered setting).
        candidates: entity indices to rank among (default all).
        hits_at: the ``k`` of Hits@k.

    Returns:
        The keys of :func:`rank_metrics`.
    """
    triples = torch.as_tensor(np.asarray(test_triples), dtype=torch.long)
    allowed = torch.ones(known.num_entities, dtype=torch.bool)
    if candidates is not None:
        allowed = torch.zeros(known.num_entities, dtype=torch.bool)
        allowed[candidates] = True
    h, r, t = triples[:, 0], triples[:, 1], triples[:, 2]
    options = []
    for side, target in (("tail", t), ("head", h)):
        excluded = known.mask(h, r, t, side) & allowed
        excluded[torch.arange(len(target)), target] = False
        options.append(int(allowed.sum()) - excluded.sum(dim=1))
    n = torch.cat(options).double()  # (2T,)
    harmonic = torch.cumsum(1.0 / torch.arange(1, int(n.max()) + 1, dtype=torch.float64), 0)
    out = {"mrr": float((harmonic[n.long() - 1] / n).mean())}
    for k in hits_at:
        out[f"hits_at_{k}"] = float((n.clamp(max=k) / n).mean())
    out["mean_rank"] = float(((n + 1) / 2).mean())
    out["num_ranks"] = float(len(n))
    return out


def random_scorer(num_entities: int, seed: int) -> Scorer:
    """Uniformly random scores: the random-ranking baseline."""
    generator = torch.Generator().manual_seed(seed)

    def score(heads: Tensor, rels: Tensor, tails: Tensor, side: str) -> Tensor:
        return torch.rand(len(heads), num_entities, generator=generator)

    return score


@torch.no_grad()
def encode_entities(
    encoder: TransformerEncoder,
    descriptions: EntityDescriptions,
    *,
    batch_size: int = 256,
    device: torch.device | str | None = None,
) -> Tensor:
    """Every entity's embedding (``[CLS]`` of its description), in batches, in eval mode.

    Entities are taken in order of description length so padding stays small; the rows
    come back in entity order.

    Args:
        encoder: the trained encoder.
        descriptions: the tokenised descriptions.
        batch_size: descriptions per forward pass.
        device: where to run (default: the encoder's device).

    Returns:
        ``(N, D)`` float32 embeddings on the CPU.
    """
    if device is None:
        device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    try:
        order = np.argsort(descriptions.lengths, kind="stable")
        out = torch.empty(len(descriptions), encoder.config.hidden_size)
        for start in batch_starts(len(order), batch_size, "encode descriptions", "entity"):
            rows = order[start : start + batch_size]
            ids, mask = descriptions.batch(rows.tolist())
            out[torch.from_numpy(rows)] = encode_descriptions(
                encoder, ids.to(device), mask.to(device)
            ).cpu()
    finally:
        encoder.train(was_training)
    return out


def split_triples(
    triples: np.ndarray, test_fraction: float = 0.1, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train/test split of ``(T, 3)`` triples; every test relation is in train.

    Args:
        triples: ``(T, 3)`` int64.
        test_fraction: share of triples held out.
        seed: the permutation's seed.

    Returns:
        ``(train, test)`` arrays of triples.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(seed).permutation(len(triples))
    num_test = max(1, round(test_fraction * len(triples)))
    test_rows, train_rows = order[:num_test], order[num_test:]
    train_relations = set(triples[train_rows, 1].tolist())
    unseen = np.array([triples[i, 1] not in train_relations for i in test_rows], dtype=bool)
    train = np.concatenate([triples[train_rows], triples[test_rows[unseen]]])
    return train, triples[test_rows[~unseen]]
