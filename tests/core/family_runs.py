"""Pre-training runs from Python for the core tests: the family runner with typed settings.

What a test passes by keyword becomes the family's ``PretrainRun``: data settings go into
``TextData``/``Seq2SeqData``, the rest into the run (``run_pretraining`` is what
``ptm pretrain`` calls after composing the config).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ptm_core.families import get
from ptm_core.families.core_settings import Seq2SeqData, Seq2SeqSettings, TextData, TextSettings
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.pretraining import PretrainResult
from ptm_core.training import TrainerConfig


def _paths(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, (str, Path)):
        return str(value)
    return [str(v) for v in value]


def pretrain_text(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    encoder: Callable[..., Any],
    objectives: Mapping[str, Callable[..., Any]],
    trainer: TrainerConfig,
    weights: Mapping[str, float] | None = None,
    seed: int = 0,
    init_from: str | Path | None = None,
    callbacks: Sequence[object] = (),
    family: str = "encoder",
    **data: Any,
) -> PretrainResult:
    """Pre-train through the ``encoder`` (or ``xlnet``) family; ``data`` are
    :class:`TextData` fields (``tokenizer``, ``max_length``, ``prepared``, ...)."""
    for key in ("tokenizer", "prepared", "cache_dir"):
        data[key] = _paths(data.get(key))
    settings = TextSettings(data=TextData(corpus=_paths(corpus), **data))
    run = PretrainRun(
        settings=settings,
        model=encoder,
        objectives=objectives,
        weights=dict(weights or {}),
        trainer=trainer,
        seed=seed,
        init_from=str(init_from) if init_from is not None else None,
        callbacks=callbacks,
    )
    result: PretrainResult = run_pretraining(get(family), run)
    return result


def pretrain_seq2seq(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    model: Callable[..., Any],
    objective: Callable[..., Any],
    trainer: TrainerConfig,
    seed: int = 0,
    callbacks: Sequence[object] = (),
    **data: Any,
) -> PretrainResult:
    """Pre-train through the ``seq2seq`` family with one objective (named by its class:
    ``bart``, ``t5``, ``mass``)."""
    target = objective.func if isinstance(objective, functools.partial) else objective
    name = str(getattr(target, "name", "seq2seq"))
    for key in ("tokenizer", "prepared", "cache_dir"):
        data[key] = _paths(data.get(key))
    settings = Seq2SeqSettings(data=Seq2SeqData(corpus=_paths(corpus), **data))
    run = PretrainRun(
        settings=settings,
        model=model,
        objectives={name: objective},
        weights={},
        trainer=trainer,
        seed=seed,
        callbacks=callbacks,
    )
    result: PretrainResult = run_pretraining(get("seq2seq"), run)
    return result
