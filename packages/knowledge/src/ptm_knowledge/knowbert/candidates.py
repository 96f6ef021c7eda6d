"""KnowBERT's candidate mentions: KG alias matches over word-piece rows, with priors.

KnowBERT (Peters et al., 2019, section 3.1) takes its candidate mentions and their
candidate entities from a dictionary of aliases with prior probabilities ``p(e | alias)``
(the released code: a WordNet lemma table, CrossWikis for Wikipedia). Here the dictionary
is the KG's :class:`~ptm_knowledge.linking.aliases.AliasTable` (every canonical name and
alias, priors from its weights). Each surface form is tokenized once with the model's
tokenizer; a row's candidate spans are the word-piece runs equal to a surface form's
pieces that start and end on word boundaries (every match: spans may overlap and nest,
as the released candidate generators give them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.knowbert.kar import NULL_ROW
from ptm_knowledge.linking.aliases import AliasTable, CaseMode

Batch = dict[str, Any]
#: ``candidate_gold`` value of a span with no supervision (padding, or a KG the corpus was
#: not linked against).
UNSUPERVISED = -1


class AliasCandidates:
    """Candidate mention spans of one KG in rows of word-piece ids.

    Args:
        kg: the KG (its entity table's names and aliases).
        tokenizer: the model's tokenizer (``tokenize_ids_batch`` or ``tokenize_ids``; a
            ``word_start_mask`` makes matches respect word boundaries).
        entity_rows: entity id -> row of the KAR's entity table (entities without a row,
            e.g. without an embedding, are never candidates).
        max_candidates: candidates kept per span (highest prior first; the released code
            keeps up to 30 per CrossWikis alias).
        case: alias matching of the :class:`AliasTable` (``smart`` by default).
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        tokenizer: Any,
        entity_rows: Mapping[str, int],
        *,
        max_candidates: int = 8,
        case: CaseMode = "smart",
    ) -> None:
        aliases = AliasTable(kg, case)
        variants = list(aliases.surface_variants())
        texts = [text for text, _ in variants]
        if hasattr(tokenizer, "tokenize_ids_batch"):
            pieces = tokenizer.tokenize_ids_batch(texts)
        else:
            pieces = [tokenizer.tokenize_ids(text) for text in texts]
        ids = kg.entities.ids
        merged: dict[tuple[int, ...], dict[int, float]] = {}
        for (_, key_id), form in zip(variants, pieces, strict=True):
            if not form:
                continue
            entities, priors = aliases.candidate_rows(key_id)
            slot = merged.setdefault(tuple(form), {})
            for entity, prior in zip(entities.tolist(), priors.tolist(), strict=True):
                row = entity_rows.get(ids[entity])
                if row is not None:  # forms that fold together (case) pool their priors
                    slot[row] = max(slot.get(row, 0.0), prior)
        self.phrases: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.longest: dict[int, int] = {}
        for form, weights in merged.items():
            if not weights:
                continue
            rows = np.fromiter(weights, dtype=np.int64)
            prior = np.fromiter(weights.values(), dtype=np.float64)
            order = np.argsort(-prior, kind="stable")[:max_candidates]
            rows, prior = rows[order], prior[order]
            self.phrases[form] = (rows, prior / prior.sum())
            self.longest[form[0]] = max(self.longest.get(form[0], 0), len(form))
        word_start = getattr(tokenizer, "word_start_mask", None)
        size = int(tokenizer.vocab_size)
        self._starts = (
            np.asarray(word_start(range(size)), dtype=bool)
            if callable(word_start)
            else np.ones(size, dtype=bool)
        )
        self.max_candidates = max_candidates
        self.num_forms = len(self.phrases)

    def spans(self, ids: Sequence[int]) -> list[tuple[int, int, np.ndarray, np.ndarray]]:
        """``(start, end, entity rows, priors)`` of every alias match in ``ids`` (``end``
        inclusive), by start then length."""
        out = []
        n = len(ids)
        starts = self._starts
        for start in range(n):
            first = ids[start]
            most = self.longest.get(first)
            if most is None or not starts[first]:
                continue
            for length in range(1, min(most, n - start) + 1):
                end = start + length
                if end < n and not starts[ids[end]]:
                    continue  # the match would end inside a word
                found = self.phrases.get(tuple(ids[start:end]))
                if found is not None:
                    out.append((start, end - 1, found[0], found[1]))
        return out


class CandidateTransform:
    """A batch transform: candidate tensors for every KG, then the objectives' own.

    Writes ``candidate_spans (B, K, S, 2)``, ``candidate_entities (B, K, S, C)``,
    ``candidate_priors (B, K, S, C)`` (see :class:`~ptm_knowledge.knowbert.model.KnowBertEncoder`)
    and ``candidate_gold (B, K, S)``: the gold entity's table row when the batch carries
    ``entity_ids`` (a linked corpus aligned to first pieces, for the KG at ``gold_kg``), the
    null row (1) for a span whose first piece carries no or another entity, ``-1`` where
    there is no supervision. ``S`` is at least 1 (a row with no match has only padding).

    Args:
        generators: one :class:`AliasCandidates` per KG, in the model's KG order.
        max_spans: spans kept per row and KG (the first ones).
        gold_kg: the index of the KG ``entity_ids`` refers to, or ``None``.
        then: the next transform (the objective mix's ``collate``), or ``None``.
    """

    def __init__(
        self,
        generators: Sequence[AliasCandidates],
        *,
        max_spans: int = 32,
        gold_kg: int | None = None,
        then: Callable[[Batch, torch.Generator], Batch] | None = None,
    ) -> None:
        self.generators = list(generators)
        self.max_spans = max_spans
        self.gold_kg = gold_kg
        self.then = then

    def candidates(self, batch: Batch) -> Batch:
        """``batch`` with the candidate keys added (a new dict; the input is not changed)."""
        ids = batch["input_ids"]
        mask = batch.get("attention_mask")
        lengths = mask.sum(1).tolist() if mask is not None else [ids.shape[1]] * len(ids)
        gold_ids = batch.get("entity_ids") if self.gold_kg is not None else None
        found = [
            [g.spans(row[:length])[: self.max_spans] for g in self.generators]
            for row, length in zip(ids.tolist(), lengths, strict=True)
        ]
        rows, kgs = len(found), len(self.generators)
        spans_n = max([1, *(len(s) for row in found for s in row)])
        cands_n = max([1, *(len(m[2]) for row in found for s in row for m in s)])
        spans = torch.full((rows, kgs, spans_n, 2), -1, dtype=torch.long)
        entities = torch.zeros((rows, kgs, spans_n, cands_n), dtype=torch.long)
        priors = torch.zeros((rows, kgs, spans_n, cands_n), dtype=torch.float32)
        gold = torch.full((rows, kgs, spans_n), UNSUPERVISED, dtype=torch.long)
        for b, row in enumerate(found):
            for k, matches in enumerate(row):
                for s, (start, end, cands, prior) in enumerate(matches):
                    spans[b, k, s] = torch.tensor([start, end])
                    entities[b, k, s, : len(cands)] = torch.from_numpy(cands)
                    priors[b, k, s, : len(cands)] = torch.from_numpy(prior).float()
                    if gold_ids is not None and k == self.gold_kg:
                        at = int(gold_ids[b, start])
                        gold[b, k, s] = at if at in cands.tolist() else NULL_ROW
        return {
            **batch,
            "candidate_spans": spans,
            "candidate_entities": entities,
            "candidate_priors": priors,
            "candidate_gold": gold,
        }

    def __call__(self, batch: Batch, generator: torch.Generator) -> Batch:
        out = self.candidates(batch)
        return self.then(out, generator) if self.then is not None else out


def linking_targets(entities: Tensor, gold: Tensor) -> Tensor:
    """Per span, the candidate slot of its gold entity ``(B, K, S)``: ``>= 0``; ``-1`` when
    the gold is the null entity or not among the candidates (the span links to nothing);
    ``-100`` without supervision."""
    hit = (entities == gold.unsqueeze(-1)) & (entities > 0)  # (B, K, S, C)
    slot = torch.where(hit.any(-1), hit.long().argmax(-1), torch.full_like(gold, -1))
    return slot.masked_fill(gold < NULL_ROW, -100)


__all__ = ["UNSUPERVISED", "AliasCandidates", "CandidateTransform", "linking_targets"]
