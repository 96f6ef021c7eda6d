"""Loaders of fine-tuned ``final/`` folders whose model a family outside core owns.

ptm-core never imports an extension. A family whose fine-tuned models are not a
:class:`~ptm_core.finetune.model.TaskModel` (ptm-classic's ULMFiT classifier over an
AWD-LSTM) names its loader in its :class:`~ptm_core.families.spec.FamilySpec`'s
``task_loaders``: ``{marker: "module:function"}``, where ``marker`` is the ``task.json`` key
that is true in such a folder's record and the function is ``load(directory) -> nn.Module``.
Specs come from the installed packages' entry points, so
:func:`~ptm_core.finetune.recipe.load_finetuned` finds the loader whether or not the owning
package was imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from torch import nn

from ptm_core.families import families
from ptm_core.families.spec import resolve

TaskLoader = Callable[[Path], nn.Module]


def task_loader(record: Mapping[str, Any]) -> TaskLoader | None:
    """The loader a registered family declares for a ``task.json`` record, or ``None``
    when no declared marker is set in it (a plain :class:`TaskModel` folder)."""
    for spec in families().values():
        for marker, target in spec.task_loaders.items():
            if record.get(marker):
                loader: TaskLoader = resolve(target)
                return loader
    return None


def family_predictor(record: Mapping[str, Any]) -> Callable[..., Any] | None:
    """The ``ptm predict`` hook a registered family declares for a ``task.json`` record
    (by its ``recipe`` or ``family``), or ``None``."""
    names = {record.get("recipe"), record.get("family")} - {None}
    for spec in families().values():
        for name, target in spec.predictors.items():
            if name in names:
                hook: Callable[..., Any] = resolve(target)
                return hook
    return None


__all__ = ["TaskLoader", "family_predictor", "task_loader"]
