"""LAMA statements read as K-BERT reads a sentence: a sentence tree with KG branches.

K-BERT (Liu et al., 2020) has no weights of its own: any masked LM becomes K-BERT's
Mask-Transformer when it reads the sentence tree (soft positions, visible matrix) built
from a KG (:mod:`ptm_knowledge.kbert`). A cloze statement ``"Paris is the capital of
[MASK] ."`` is laid out as ``[CLS] statement [SEP]``, every word that names a KG subject
gets its branches (``"Paris"`` -> ``"located in France"``, ...), and the MLM head scores
the ``[MASK]``.

The probed fact must not reach the model through its own branch: ``"Paris" -> "capital
of France"`` would hand the answer to the mask (a trunk token sees its subject's branches).
So the branch text of the statement's own triple ``(subject, relation, object)`` is left
out of the subject's objects before ``max_entities`` cuts them, and the probe counts how
many statements lost their own triple that way. Other facts stay: a branch ``"located in
France"`` is the knowledge K-BERT is meant to use, and the report counts the statements
whose answer still appears in a branch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from ptm_core.analysis.masked_lm_model import MaskedLanguageModel
from ptm_knowledge.kbert.model import KBertFeaturizer, segment_words
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.probing.statements import ClozeStatement

#: Tree length when the encoder does not say its position table (statements are short).
MAX_LENGTH = 128


@dataclass
class TreeInjection:
    """How statements are read as K-BERT sentence trees.

    Attributes:
        knowledge: subject surface -> branch texts
            (:func:`~ptm_knowledge.kbert.knowledge_from_graph`); an empty mapping reads every statement without
            branches (K-BERT with injection off, the kg-free ablation).
        source: where the branches came from (a KG folder), for the report.
        max_entities: branches per subject (K-BERT's default 2).
        predicate: the branch texts carry the relation (``"capital of France"``), as
            ``knowledge`` was built; the probed triple's branch is spelt the same way.
    """

    knowledge: Mapping[str, Sequence[str]]
    source: str
    max_entities: int = 2
    predicate: bool = True

    @property
    def enabled(self) -> bool:
        return bool(self.source) and self.source != "none"


@dataclass
class StatementTrees:
    """The model inputs of each statement's sentence tree.

    Attributes:
        ids: token ids per tree (trunk and branch tokens).
        mask_positions: where the ``[MASK]`` sits in each tree.
        soft_positions: K-BERT's position ids per tree.
        visibility: ``(L, L)`` bool visible matrix per tree.
        tokens: the tree's units per statement (for reading and tests).
        branches: the branch texts injected per statement.
        counts: what the report says about the injection (see :func:`statement_trees`).
    """

    ids: list[list[int]] = field(default_factory=list)
    mask_positions: list[int] = field(default_factory=list)
    soft_positions: list[list[int]] = field(default_factory=list)
    visibility: list[Tensor] = field(default_factory=list)
    tokens: list[list[str]] = field(default_factory=list)
    branches: list[list[str]] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)


class _LeavingOut(Mapping[str, Sequence[str]]):
    """``knowledge`` without one branch of one subject (the statement being probed)."""

    def __init__(self, knowledge: Mapping[str, Sequence[str]]) -> None:
        self.knowledge = knowledge
        self.max_subject_words = getattr(knowledge, "max_subject_words", None)
        self.subject = ""
        self.branch = ""

    def __getitem__(self, key: str) -> Sequence[str]:
        objects = self.knowledge[key]
        if key != self.subject:
            return objects
        return [o for o in objects if o != self.branch]

    def __contains__(self, key: object) -> bool:
        return key in self.knowledge

    def __iter__(self) -> Iterator[str]:
        return iter(self.knowledge)

    def __len__(self) -> int:
        return len(self.knowledge)


def own_branch(relation: str, object_name: str, *, predicate: bool) -> str:
    """The branch text a triple gets in K-BERT's table (as ``knowledge_from_graph`` spells
    it): ``"capital of France"`` with the predicate, ``"France"`` without."""
    return f"{relation.replace('_', ' ')} {object_name}" if predicate else object_name


def statement_words(text: str, mask_token: str) -> list[str]:
    """A statement's words, its mask token kept whole (``segment_words`` would split
    ``[MASK]`` into ``[``, ``MASK``, ``]``)."""
    before, _, after = text.partition(mask_token)
    return [*segment_words(before), mask_token, *segment_words(after)]


def statement_trees(
    model: MaskedLanguageModel,
    statements: Sequence[ClozeStatement],
    kg: KnowledgeGraph,
    injection: TreeInjection,
    *,
    exclude_own_triple: bool = True,
) -> StatementTrees:
    """Each statement as K-BERT's sentence tree, its own triple left out of the branches.

    Args:
        model: the masked LM (its tokenizer splits words and branches into pieces).
        statements: the cloze statements (:func:`~ptm_knowledge.probing.build_statements`).
        kg: the KG the statements came from (entity names spell the subject and the
            probed triple's branch).
        injection: the branches and K-BERT's settings.
        exclude_own_triple: ``False`` keeps the probed triple's branch (only to show
            that the answer then leaks; never for a score).

    Returns:
        The inputs, with ``counts``: ``statements``; ``with_branches`` (statements whose
        tree got at least one branch); ``branches`` (branches injected); ``own_triple_in_kg``
        (statements whose triple is in the injected KG under the subject's name);
        ``own_triple_removed`` (of those, the ones whose tree would have held that branch:
        the subject was matched, the branch was within ``max_entities`` and fitted);
        ``answer_in_branches`` (statements whose answer token is still in a branch, from
        another fact); ``retokenized`` (trees whose sentence pieces differ from the plain
        tokenisation); ``dropped_branches`` (cut to fit ``max_length``).

    Raises:
        ValueError: a tree without exactly one mask token (names the statement).
    """
    knowledge = _LeavingOut(injection.knowledge)
    config = getattr(model.encoder, "config", None)
    limit = int(getattr(config, "max_positions", MAX_LENGTH) or MAX_LENGTH)
    featurizer = KBertFeaturizer(
        model.tokenizer,
        knowledge,
        max_entities=injection.max_entities,
        max_length=min(MAX_LENGTH, limit),
    )
    out = StatementTrees()
    counts = dict.fromkeys(
        (
            "statements",
            "with_branches",
            "branches",
            "own_triple_in_kg",
            "own_triple_removed",
            "answer_in_branches",
            "retokenized",
            "dropped_branches",
        ),
        0,
    )
    for statement in statements:
        subject = kg[statement.subject_id].name
        branch = own_branch(
            statement.relation, kg[statement.object_id].name, predicate=injection.predicate
        )
        words = statement_words(statement.text, model.mask_token)
        objects = list(injection.knowledge.get(subject, ()))
        if branch in objects:
            counts["own_triple_in_kg"] += 1
            knowledge.subject, knowledge.branch = "", ""
            pieces = " ".join(featurizer.split(branch))
            if pieces in _branch_texts(featurizer.tree(words)):
                counts["own_triple_removed"] += 1
        knowledge.subject, knowledge.branch = (subject, branch) if exclude_own_triple else ("", "")
        tree = featurizer.tree(words)
        item = featurizer.encode(words)
        ids = item["input_ids"].tolist()
        where = [i for i, t in enumerate(ids) if t == model.mask_id]
        if len(where) != 1:
            raise ValueError(
                f"{statement.text!r}: its sentence tree holds {len(where)} mask tokens, not 1"
            )
        is_knowledge = item["is_knowledge"]
        trunk = [t for t, k in zip(ids, is_knowledge.tolist(), strict=True) if not k]
        branch_ids = {t for t, k in zip(ids, is_knowledge.tolist(), strict=True) if k}
        injected = _branch_texts(tree)
        counts["statements"] += 1
        counts["with_branches"] += bool(injected)
        counts["branches"] += len(injected)
        counts["answer_in_branches"] += statement.object_token in branch_ids
        counts["retokenized"] += trunk != list(statement.ids)
        counts["dropped_branches"] += tree.num_dropped_branches
        out.ids.append(ids)
        out.mask_positions.append(where[0])
        out.soft_positions.append(item["position_ids"].tolist())
        out.visibility.append(item["visible_matrix"])
        out.tokens.append(list(tree.tokens))
        out.branches.append(injected)
    knowledge.subject, knowledge.branch = "", ""
    out.counts = {"kg": injection.source, "max_entities": injection.max_entities, **counts}
    return out


def _branch_texts(tree: Any) -> list[str]:
    """The injected branches of a tree, each as its units joined by spaces."""
    branches: dict[int, list[str]] = {}
    for token, branch in zip(tree.tokens, tree.branch_id.tolist(), strict=True):
        if branch >= 0:
            branches.setdefault(branch, []).append(token)
    return [" ".join(units) for units in branches.values()]
