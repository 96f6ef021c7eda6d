"""LAMA metrics: P@1, P@10 and MRR of the object at the mask, per relation and overall.

The rank of the object is ``1 +`` the number of vocabulary ids scored strictly higher,
leaving out the other objects of the same ``(subject, relation)`` (LAMA's filtered
setting) and the special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]``, ``[UNK]``),
which are never an answer. "Overall" is the mean over relations, as LAMA reports it;
``micro`` is the mean over statements.

Two models are compared on the facts both could be asked (a model whose tokenizer splits
an object loses that statement): per relation, and overall with a paired bootstrap
interval and an exact McNemar test on P@1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ptm_core.analysis.masked_lm_model import MaskedLanguageModel
from ptm_knowledge.probing.sentence_trees import StatementTrees
from ptm_knowledge.probing.statements import ClozeStatement, StatementSet

#: The cut-offs of P@k.
TOP_K = (1, 10)


@dataclass
class LamaResult:
    """The ranks of one model on a statement set.

    Attributes:
        model: the folder scored.
        statements: the statements, in order.
        ranks: the filtered rank of each statement's object (1 = top).
        top: each statement's 10 best tokens (strings).
        dropped: relation -> reason -> triples without a statement.
        templates: relation -> template used; ``derived``: those made from the name.
        with_entity: statements whose subject got its entity (ERNIE-THU).
        injection: what K-BERT's sentence trees injected (the ``counts`` of
            :func:`~ptm_knowledge.probing.sentence_trees.statement_trees`); ``None`` for
            plain statements.
        branches: the branch texts each statement's tree held (K-BERT).
    """

    model: str
    statements: list[ClozeStatement]
    ranks: np.ndarray
    top: list[list[str]]
    dropped: dict[str, dict[str, int]] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    derived: list[str] = field(default_factory=list)
    with_entity: int | None = None
    injection: dict[str, Any] | None = None
    branches: list[list[str]] | None = None

    def metrics(self, relation: str | None = None, *, seen: bool | None = None) -> dict[str, Any]:
        """``{"n", "p@1", "p@10", "mrr"}`` over one relation (or all), optionally over seen
        (``True``) or unseen (``False``) facts only."""
        keep = np.array(
            [
                (relation is None or s.relation == relation) and (seen is None or s.seen is seen)
                for s in self.statements
            ],
            dtype=bool,
        )
        return rank_metrics(self.ranks[keep])

    @property
    def relations(self) -> list[str]:
        return list(dict.fromkeys(s.relation for s in self.statements))

    def summary(self) -> dict[str, Any]:
        """Per-relation metrics, the macro mean (LAMA's overall) and the micro mean."""
        per = {r: self.metrics(r) for r in self.relations}
        macro = {
            name: float(np.mean([m[name] for m in per.values()])) if per else 0.0
            for name in ("p@1", "p@10", "mrr")
        }
        out: dict[str, Any] = {
            "model": self.model,
            "relations": per,
            "overall": {"n": len(self.statements), **macro},
            "micro": self.metrics(),
            "dropped": self.dropped,
            "templates": self.templates,
            "derived_templates": self.derived,
        }
        if self.with_entity is not None:
            out["statements_with_subject_entity"] = self.with_entity
        if self.injection is not None:
            out["sentence_trees"] = self.injection
        if self.statements and self.statements[0].seen is not None:
            out["seen"] = self.metrics(seen=True)
            out["unseen"] = self.metrics(seen=False)
        return out


def rank_metrics(ranks: np.ndarray) -> dict[str, Any]:
    """P@k and MRR of filtered ranks (1 = top); zeros for no statement."""
    if len(ranks) == 0:
        return {"n": 0, "p@1": 0.0, "p@10": 0.0, "mrr": 0.0}
    out: dict[str, Any] = {"n": len(ranks)}
    for k in TOP_K:
        out[f"p@{k}"] = float(np.mean(ranks <= k))
    out["mrr"] = float(np.mean(1.0 / ranks))
    return out


def filtered_ranks(
    log_probs: torch.Tensor, statements: Sequence[ClozeStatement], excluded: Sequence[int]
) -> tuple[np.ndarray, torch.Tensor]:
    """Ranks of each statement's object, and the scores with filtered ids at ``-inf``.

    Args:
        log_probs: ``(N, V)`` scores at the masks.
        statements: the ``N`` statements.
        excluded: ids never ranked (special tokens, ids past the tokenizer's vocabulary).
    """
    scores = log_probs.clone()
    if excluded:
        scores[:, list(excluded)] = float("-inf")
    gold = torch.tensor([s.object_token for s in statements], dtype=torch.long)
    for i, statement in enumerate(statements):
        if statement.other_objects:
            scores[i, list(statement.other_objects)] = float("-inf")
    target = scores.gather(1, gold[:, None])
    ranks = 1 + (scores > target).sum(dim=1)
    return ranks.numpy().astype(np.int64), scores


def score_lama(
    model: MaskedLanguageModel,
    statements: StatementSet,
    *,
    batch_size: int = 64,
    trees: StatementTrees | None = None,
) -> LamaResult:
    """Rank every statement's object under ``model`` (see the module docstring).

    Args:
        model: the masked LM.
        statements: the statements (:func:`~ptm_knowledge.probing.build_statements`).
        batch_size: statements per forward pass.
        trees: the statements as K-BERT sentence trees
            (:func:`~ptm_knowledge.probing.sentence_trees.statement_trees`): the model reads
            each tree with its soft positions and visible matrix instead of the statement.
    """
    items = statements.statements
    if not items:
        raise ValueError(
            f"{model.source}: no statement to score; every object needs one token of this "
            "model's vocabulary (dropped: "
            + "; ".join(f"{r}: {dict(c)}" for r, c in statements.dropped.items())
            + ")"
        )
    entities = None
    if trees is not None and model.entity_index is not None:
        raise ValueError(
            f"{model.source}: reads entity inputs (ERNIE-THU); K-BERT's sentence trees are "
            "for a plain masked LM"
        )
    if model.entity_index is not None:
        entities = []
        for s in items:
            row = [-1] * len(s.ids)
            if s.subject_id in model.entity_index and s.subject_position >= 0:
                row[s.subject_position] = model.entity_index[s.subject_id]
            entities.append(row)
    if trees is not None:
        log_probs = model.log_probs(
            trees.ids,
            trees.mask_positions,
            position_ids=trees.soft_positions,
            visibility=trees.visibility,
            batch_size=batch_size,
        )
    else:
        log_probs = model.log_probs(
            [s.ids for s in items],
            [s.mask_position for s in items],
            entities=entities,
            batch_size=batch_size,
        )
    info = model.tokenizer.vocab_info  # type: ignore[attr-defined]
    vocab = int(model.tokenizer.vocab_size)  # type: ignore[attr-defined]
    excluded = sorted(set(info.special_ids) | set(range(vocab, log_probs.shape[1])))
    ranks, scores = filtered_ranks(log_probs, items, excluded)
    best = scores.topk(min(10, scores.shape[1]), dim=1).indices.tolist()
    backend = model.tokenizer.backend  # type: ignore[attr-defined]
    top = [[backend.id_to_token(i) or str(i) for i in row] for row in best]
    with_entity = None
    if entities is not None:
        with_entity = sum(any(e >= 0 for e in row) for row in entities)
    return LamaResult(
        with_entity=with_entity,
        model=model.source,
        statements=items,
        ranks=ranks,
        top=top,
        dropped={r: dict(c) for r, c in statements.dropped.items()},
        templates=statements.templates,
        derived=statements.derived,
        injection=None if trees is None else trees.counts,
        branches=None if trees is None else trees.branches,
    )


def compare_lama(
    first: LamaResult, second: LamaResult, *, resamples: int = 2000, seed: int = 0
) -> dict[str, Any]:
    """P@1 and MRR of two models on the facts both were asked, per relation and overall.

    Returns a mapping with ``relations`` (per relation: n, each model's P@1/MRR and the
    difference), ``overall`` (micro P@1 of each, the difference, its paired-bootstrap 95%
    interval, McNemar's exact p-value on the discordant facts) and ``only_first`` /
    ``only_second`` (facts one model could not be asked).
    """
    from scipy.stats import binomtest

    index_a = {s.key: i for i, s in enumerate(first.statements)}
    index_b = {s.key: i for i, s in enumerate(second.statements)}
    common = [k for k in index_a if k in index_b]
    if not common:
        raise ValueError(
            f"{first.model} and {second.model} share no statement: their tokenizers leave no "
            "common single-token object"
        )
    ra = first.ranks[[index_a[k] for k in common]]
    rb = second.ranks[[index_b[k] for k in common]]
    relation = np.array([k[1] for k in common])
    per: dict[str, Any] = {}
    for name in dict.fromkeys(relation.tolist()):
        keep = relation == name
        a, b = rank_metrics(ra[keep]), rank_metrics(rb[keep])
        per[name] = {
            "n": a["n"],
            "first": {"p@1": a["p@1"], "mrr": a["mrr"]},
            "second": {"p@1": b["p@1"], "mrr": b["mrr"]},
            "p@1_difference": b["p@1"] - a["p@1"],
        }
    hit_a, hit_b = (ra == 1).astype(float), (rb == 1).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(common), size=(resamples, len(common)))
    differences = (hit_b[draws] - hit_a[draws]).mean(axis=1)
    only_b, only_a = (
        int(((hit_b == 1) & (hit_a == 0)).sum()),
        int(((hit_a == 1) & (hit_b == 0)).sum()),
    )
    p_value = binomtest(only_b, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    return {
        "first": first.model,
        "second": second.model,
        "relations": per,
        "overall": {
            "n": len(common),
            "first": rank_metrics(ra),
            "second": rank_metrics(rb),
            "p@1_difference": float(hit_b.mean() - hit_a.mean()),
            "p@1_difference_ci95": [
                float(np.quantile(differences, 0.025)),
                float(np.quantile(differences, 0.975)),
            ],
            "mcnemar_p": float(p_value),
            "only_second_right": only_b,
            "only_first_right": only_a,
        },
        "only_first": len(index_a) - len(common),
        "only_second": len(index_b) - len(common),
    }
