"""Cloze statements from a KG's triples, tokenised for one model.

Each triple ``(s, r, o)`` with a template for ``r`` becomes a statement: the template with
``[X]`` = the subject's name and ``[Y]`` = the model's mask token. LAMA scores only objects
that are **one token** in the model's vocabulary, so that every model ranks single ids
(Petroni et al., 2019). ptm checks that by tokenising the sentence twice, once with the
object and once with the mask: the object is one token when both have the same length and
differ only at the mask. This works for WordPiece (``dog``), byte-level BPE (``Ġdog``) and
Unigram (``▁dog``) alike. Statements whose object needs several tokens are counted as
dropped, per relation, and the report says how many.

Other objects of the same ``(subject, relation)`` (Marie Curie is a citizen of Poland and
of France) are left out of the ranking of each, as in LAMA's evaluation ("filtered").
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ptm_core.analysis.masked_lm_model import MaskedLanguageModel
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.probing.templates import OBJECT, SUBJECT, derived_template

#: Why a triple gave no statement (the report counts each, per relation).
MULTI_TOKEN = "object is not one token"
UNKNOWN_TOKEN = "object is the unknown token"


@dataclass(frozen=True)
class ClozeStatement:
    """One fact as a cloze statement for one model.

    Attributes:
        relation: the triple's relation.
        subject_id: the head entity's id.
        object_id: the tail entity's id.
        text: the statement with the model's mask token where the object goes.
        answer: the object's name (what the mask stands for).
        ids: the statement's token ids (with special tokens).
        mask_position: index of the mask in ``ids``.
        subject_position: index of the subject's first piece in ``ids`` (where a model
            that reads aligned entities gets the subject entity).
        object_token: the id the model should predict.
        other_objects: ids of the other objects of ``(subject, relation)``, not ranked.
        seen: whether the triple was in the given training triples (``None``: not asked).
    """

    relation: str
    subject_id: str
    object_id: str
    text: str
    answer: str
    ids: tuple[int, ...]
    mask_position: int
    object_token: int
    subject_position: int = -1
    other_objects: tuple[int, ...] = ()
    seen: bool | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """``(subject_id, relation, object_id)``: the same fact across models."""
        return (self.subject_id, self.relation, self.object_id)


@dataclass
class StatementSet:
    """The statements of a KG for one model, and what was left out.

    Attributes:
        statements: the statements, grouped by relation in KG order.
        dropped: relation -> reason -> number of triples without a statement.
        derived: relations whose template came from the relation's name.
        templates: relation -> the template used.
    """

    statements: list[ClozeStatement]
    dropped: dict[str, Counter[str]] = field(default_factory=dict)
    derived: list[str] = field(default_factory=list)
    templates: dict[str, str] = field(default_factory=dict)

    @property
    def relations(self) -> list[str]:
        return list(dict.fromkeys(s.relation for s in self.statements))


def _fill(template: str, subject: str, obj: str) -> str:
    return template.replace(SUBJECT, subject).replace(OBJECT, obj)


def _first_piece(offsets: list[tuple[int, int]], start: int) -> int:
    """The first token whose characters begin at or after ``start`` (special tokens have
    empty spans and are skipped)."""
    for position, (begin, end) in enumerate(offsets):
        if end > begin and end > start and begin >= start - 1:
            return position
    return -1


def build_statements(
    kg: KnowledgeGraph,
    model: MaskedLanguageModel,
    templates: Mapping[str, str],
    *,
    relations: Iterable[str] | None = None,
    max_per_relation: int | None = None,
    seed: int = 0,
    seen: set[tuple[str, str, str]] | None = None,
) -> StatementSet:
    """Cloze statements for ``model`` from the triples of ``kg``.

    Args:
        kg: the knowledge graph (entity names fill ``[X]`` and ``[Y]``).
        model: the model the statements are for (its tokenizer decides single tokens).
        templates: relation -> template; other relations get :func:`derived_template`.
        relations: only these relations (default: every relation of the KG).
        max_per_relation: keep at most this many triples per relation, a seeded sample
            in KG order (default: all).
        seed: seed of that sample.
        seen: training triples ``(head, relation, tail)``; each statement then says whether
            its fact was among them.

    Returns:
        The statements and, per relation, how many triples were dropped and why.
    """
    wanted = None if relations is None else set(relations)
    by_relation: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for head, relation, tail in kg.triples.labeled():
        if wanted is None or relation in wanted:
            by_relation[relation].append((head, tail))
    if wanted is not None and wanted - set(by_relation):
        raise ValueError(
            f"relation(s) {', '.join(sorted(wanted - set(by_relation)))} have no triple in the "
            f"KG; its relations: {', '.join(sorted(set(kg.triples.relation_names)))}"
        )
    result = StatementSet(statements=[])
    unk = int(model.tokenizer.vocab_info.unk_id)  # type: ignore[attr-defined]
    for relation, pairs in by_relation.items():
        template = templates.get(relation)
        if template is None:
            template = derived_template(relation)
            result.derived.append(relation)
        result.templates[relation] = template
        chosen = set(range(len(pairs)))
        if max_per_relation is not None and len(pairs) > max_per_relation:
            rng = random.Random(f"{seed}:{relation}")
            chosen = set(rng.sample(range(len(pairs)), max_per_relation))
        # The other objects of a chosen subject are filtered out of its ranking even when
        # the sample left their triples out: tokenise those triples too.
        heads = {pairs[i][0] for i in chosen}
        work = [i for i in range(len(pairs)) if i in chosen or pairs[i][0] in heads]
        names = [(kg[pairs[i][0]].name, kg[pairs[i][1]].name) for i in work]
        masked = [_fill(template, s, model.mask_token) for s, _ in names]
        filled = [_fill(template, s, o) for s, o in names]
        encoded_masked = model.encode_with_offsets(masked)
        encoded = [ids for ids, _ in encoded_masked] + model.encode(filled)
        subject_start = len(template.split(SUBJECT)[0].replace(OBJECT, model.mask_token))
        made: list[tuple[int, int, int]] = []  # (index in work, mask position, object id)
        dropped: Counter[str] = Counter()
        for w, i in enumerate(work):
            with_mask, with_object = encoded[w], encoded[len(work) + w]
            where = [p for p, t in enumerate(with_mask) if t == model.mask_id]
            differ = [
                p for p, (a, b) in enumerate(zip(with_mask, with_object, strict=False)) if a != b
            ]
            if len(with_mask) != len(with_object) or len(where) != 1 or differ != where:
                reason = MULTI_TOKEN
            elif with_object[where[0]] == unk:
                reason = UNKNOWN_TOKEN
            else:
                made.append((w, where[0], with_object[where[0]]))
                continue
            if i in chosen:
                dropped[reason] += 1
        objects: dict[str, set[int]] = defaultdict(set)
        for w, _, token in made:
            objects[pairs[work[w]][0]].add(token)
        for w, position, token in made:
            if work[w] not in chosen:
                continue
            head, tail = pairs[work[w]]
            result.statements.append(
                ClozeStatement(
                    relation=relation,
                    subject_id=head,
                    object_id=tail,
                    text=masked[w],
                    answer=names[w][1],
                    ids=tuple(encoded[w]),
                    mask_position=position,
                    object_token=token,
                    subject_position=_first_piece(encoded_masked[w][1], subject_start),
                    other_objects=tuple(sorted(objects[head] - {token})),
                    seen=None if seen is None else (head, relation, tail) in seen,
                )
            )
        if dropped:
            result.dropped[relation] = dropped
    return result
