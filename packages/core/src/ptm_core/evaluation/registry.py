"""The evaluation registry: which evaluation scores a model directory of a given kind.

Each package registers the evaluations of the model kinds it owns (the ``"ptm_model"``
kinds of :mod:`ptm_core.model_kinds`, or a fine-tuned task's kind) in its own module
(``ptm_core.evaluations``, ``ptm_knowledge.evaluations``, ...); ``ptm evaluate`` reads
``config.json``'s ``"ptm_model"`` and looks the entry up here. This module imports nothing
heavy: the scoring functions import their models when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: ``score(model_dir, corpus, seed, random_init)`` -> metrics. ``corpus`` is ``None`` when
#: the user gave none (and the evaluation has no default text corpus). With
#: ``random_init=True`` it scores the evaluation's own baseline (``baseline_name``): for most,
#: the same architecture from random init, seeded by ``seed``. A ``"_metric"`` key names the
#: headline metric when the evaluation's ``metric`` is ``""`` (a fine-tuned task's own).
ScoreFn = Callable[[str, "str | None", int, bool], dict[str, Any]]
#: ``check(model_dir)``: raise ``FileNotFoundError``/``ValueError`` (one line naming the
#: file) when a file the evaluation needs is missing or broken, before a model is loaded.
CheckFn = Callable[[Path], None]


@dataclass(frozen=True)
class Evaluation:
    """How a family of models is scored.

    Attributes:
        name: the family (shown in the report and returned as ``"family"``).
        metric: the headline metric; ``""``: the one ``score`` returns as ``"_metric"``.
        higher_is_better: whether a larger headline metric is better.
        description: what the numbers mean (the report's first line).
        score: the scoring function (see :data:`ScoreFn`).
        kinds: the ``"ptm_model"`` kinds this evaluation scores.
        needs_corpus: what ``corpus`` must be, when there is no default (``None``: optional).
        text_corpus: ``corpus`` defaults to the bundled held-out text sample.
        corpus_note: what the report names as data when no corpus was given (or, when
            ``uses_corpus`` is false, always).
        uses_corpus: whether ``score`` reads ``corpus`` (KG embeddings' recorded scores do not).
        baseline_name: what ``score(..., random_init=True)`` scores.
        downstream: whether ``tasks`` (fine-tuning the model on task presets) apply.
        check: checks the directory's files (see :data:`CheckFn`).
    """

    name: str
    metric: str
    higher_is_better: bool
    description: str
    score: ScoreFn
    kinds: tuple[str, ...] = ()
    needs_corpus: str | None = None
    text_corpus: bool = False
    corpus_note: str | None = None
    uses_corpus: bool = True
    baseline_name: str = "random init"
    downstream: bool = True
    check: CheckFn | None = None


_BY_NAME: dict[str, Evaluation] = {}
_BY_KIND: dict[str, str] = {}


def register_evaluation(evaluation: Evaluation) -> Evaluation:
    """Add ``evaluation``; a second registration of its name or of one of its kinds is an
    error (unless it is the very same entry, e.g. a module imported twice)."""
    known = _BY_NAME.get(evaluation.name)
    if known is not None and known != evaluation:
        raise ValueError(f"evaluation {evaluation.name!r} is already registered")
    for kind in evaluation.kinds:
        owner = _BY_KIND.get(kind)
        if owner is not None and owner != evaluation.name:
            raise ValueError(f"model kind {kind!r} is already scored by evaluation {owner!r}")
    _BY_NAME[evaluation.name] = evaluation
    for kind in evaluation.kinds:
        _BY_KIND[kind] = evaluation.name
    return evaluation


def get_evaluation(name: str) -> Evaluation:
    """The evaluation registered as ``name`` (a family)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(sorted(_BY_NAME)) or "none"
        raise ValueError(f"no evaluation named {name!r}; registered: {known}") from None


def evaluation_for_kind(kind: str) -> Evaluation:
    """The evaluation of the ``"ptm_model"`` kind ``kind``."""
    name = _BY_KIND.get(kind)
    if name is None:
        known = ", ".join(sorted(_BY_KIND)) or "none"
        raise ValueError(
            f"no evaluation is registered for model kind {kind!r} (registered kinds: {known}); "
            "is the package that owns it installed?"
        )
    return _BY_NAME[name]


def registered_evaluations() -> dict[str, Evaluation]:
    """Every registered evaluation, by name."""
    return dict(_BY_NAME)


def registered_kinds() -> dict[str, str]:
    """``"ptm_model"`` kind -> the name of its evaluation."""
    return dict(_BY_KIND)


__all__ = [
    "CheckFn",
    "Evaluation",
    "ScoreFn",
    "evaluation_for_kind",
    "get_evaluation",
    "register_evaluation",
    "registered_evaluations",
    "registered_kinds",
]
