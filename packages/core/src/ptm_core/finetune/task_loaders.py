"""Loaders of fine-tuned ``final/`` folders whose model an extension package owns.

ptm-core never imports an extension, so a package whose fine-tuned models are not a
:class:`~ptm_core.finetune.model.TaskModel` (ptm-classic's ULMFiT classifier over an
AWD-LSTM) names its loader by entry point, in its ``pyproject.toml``::

    [project.entry-points."ptm.task_loaders"]
    ulmfit = "<module>:<function>"

The name is the ``task.json`` key that marks such a folder (true in its record); the value
is ``load(directory) -> nn.Module``. Entry points are read from the installed packages'
metadata, so :func:`~ptm_core.finetune.recipe.load_finetuned` finds the loader whether or
not the owning package was imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from torch import nn

#: The entry-point group extension packages declare their task loaders in.
GROUP = "ptm.task_loaders"

TaskLoader = Callable[[Path], nn.Module]


def task_loader(record: Mapping[str, Any]) -> TaskLoader | None:
    """The loader an installed package declares for a ``task.json`` record, or ``None``
    when no declared marker is set in it (a plain :class:`TaskModel` folder)."""
    for entry in entry_points(group=GROUP):
        if record.get(entry.name):
            loader: TaskLoader = entry.load()
            return loader
    return None


__all__ = ["GROUP", "TaskLoader", "task_loader"]
