"""The ``"ptm_model"`` kind of a multimodal ``final/`` (from its ``architecture``), and the
tensor names of folders written before the family spec."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from ptm_core.model_kinds import KIND_KEY, with_kind
from ptm_multimodal.kinds import IMAGEBERT, LXMERT, VILBERT, VISUALBERT, VLBERT

ARCHITECTURE_KINDS = {
    "visualbert": VISUALBERT,
    "vilbert": VILBERT,
    "lxmert": LXMERT,
    "vlbert": VLBERT,
    "imagebert": IMAGEBERT,
}
#: config.json keys that are bookkeeping, not builder numbers.
NOT_NUMBERS = ("architecture", "objectives", "feature_spec", KIND_KEY)
# The multimodal pre-training wrapper named its network `model`; the generic
# PretrainingModel names it `encoder`.
_OLD_PREFIX, _PREFIX = "model.", "encoder."

T = TypeVar("T")


def with_model_kind(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``"ptm_model"`` set from its ``architecture`` (unchanged if unknown)."""
    kind = ARCHITECTURE_KINDS.get(str(config.get("architecture")))
    return dict(with_kind(config, kind)) if kind is not None else config


def current_names(state: Mapping[str, T]) -> dict[str, T]:
    """``state`` with the network's tensors under ``encoder.``, as the generic
    :class:`~ptm_core.models.pretraining.PretrainingModel` names them (folders written
    before it hold them under ``model.``)."""
    return {
        _PREFIX + k.removeprefix(_OLD_PREFIX) if k.startswith(_OLD_PREFIX) else k: v
        for k, v in state.items()
    }


def _architecture(path: str | Path) -> str | None:
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(config, dict) or KIND_KEY in config or "objectives" not in config:
        return None
    return str(config.get("architecture"))


def is_visualbert(path: str | Path) -> bool:
    """A VisualBERT ``final/`` written before ``config.json`` carried ``"ptm_model"``."""
    return _architecture(path) == "visualbert"


def is_vilbert(path: str | Path) -> bool:
    """A ViLBERT ``final/`` written before ``config.json`` carried ``"ptm_model"``."""
    return _architecture(path) == "vilbert"


def is_lxmert(path: str | Path) -> bool:
    """An LXMERT ``final/`` written before ``config.json`` carried ``"ptm_model"``."""
    return _architecture(path) == "lxmert"
